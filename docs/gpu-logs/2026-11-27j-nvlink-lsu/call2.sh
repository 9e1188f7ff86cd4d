# Session 10, call 2 (4x H200): the all-gather's `--copy lsu` now fans out from every thread's
# registers (8 vectors ahead); swept over intra CTAs at world 4 and 2 beside fan / bulk and the
# copy engine; the probe's TMA fan for ncu's NVLink protocol bytes; gpu_comm on 4 GPUs.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
ag() { local tag=$1; shift; timeout 60 $M bench allgather --sizes 256M "$@" > $L/$tag.log 2>&1; echo "$tag rc=$? $(grep -E 'mkernel|copy-engine' $L/$tag.log | awk "{print \$(NF-4), \$(NF-1)}" | tr '\n' ' ')" | tee -a $L/sweep.txt; }
for rep in 1 2; do
  ag w4-fan16-r$rep --world 4 --copy fan
  for c in 16 32 64 132; do ag w4-lsu$c-r$rep --world 4 --copy lsu --intra-ctas $c; done
done
ag w4-lsu32-inplace --world 4 --copy lsu --intra-ctas 32 --in-place
ag w4-fan16-inplace --world 4 --copy fan --in-place
export CUDA_VISIBLE_DEVICES=0,1
ag w2-bulk16 --world 2 --copy bulk
for c in 16 32 64 132; do ag w2-lsu$c --world 2 --copy lsu --intra-ctas $c; done
unset CUDA_VISIBLE_DEVICES
stamp sweep
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/nvlprobe $H/nvlprobe.cu > $L/nvcc.log 2>&1; stamp "nvcc rc=$?"
timeout 60 /tmp/nvlprobe 4 64 > $L/probe-w4.log 2>&1; stamp "probe w4 rc=$?"
for k in tma_fan fan; do
timeout 90 ncu --clock-control none -k regex:^$k -c 1 --metrics nvltx__bytes.sum,nvltx__bytes_data_user.sum,nvltx__bytes_data_protocol.sum,gpu__time_duration.sum /tmp/nvlprobe 4 64 prof > $L/ncu-$k.log 2>&1; stamp "ncu $k rc=$?"
done
export MKERNEL_REQUIRE_GPU=1
timeout 300 $H/bin/test-gpu_comm --test-threads 1 > $L/test-gpu_comm.log 2>&1; stamp "gpu_comm rc=$?"
grep -E "^test |test result" $L/test-gpu_comm.log
cat $L/sweep.txt; grep -E "tma-fan|fan-|ce-" $L/probe-w4.log; grep -E "nvltx|duration" $L/ncu-*.log
pack
