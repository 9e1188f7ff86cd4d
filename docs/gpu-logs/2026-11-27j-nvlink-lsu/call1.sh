# Session 10, call 1 (4x H200): an NVLink probe (SM ld/st copies with up to 264 CTAs, fan / split /
# pull, against the copy engines, world 4 and 2), ours beside it, ncu's NVLink byte counters, and
# the 4-GPU gpu_gemm_rs cases on the review commits (d2c80c2's binaries).
source "$(dirname "$0")/prep.sh"
nvcc -O3 -std=c++17 -gencode=arch=compute_90a,code=sm_90a -o /tmp/nvlprobe $H/nvlprobe.cu > $OUT/nvcc.log 2>&1; stamp "nvcc rc=$?"
timeout 60 /tmp/nvlprobe 4 64 > $OUT/probe-w4.log 2>&1; stamp "probe w4 rc=$?"
timeout 60 /tmp/nvlprobe 2 128 > $OUT/probe-w2.log 2>&1; stamp "probe w2 rc=$?"
CUDA_VISIBLE_DEVICES=0,1,2,3 timeout 60 $H/bin/mkernel bench allgather --world 4 --sizes 256M --copy fan > $OUT/ours-w4.log 2>&1; stamp "ours w4 rc=$?"
CUDA_VISIBLE_DEVICES=0,1 timeout 60 $H/bin/mkernel bench allgather --world 2 --sizes 256M > $OUT/ours-w2.log 2>&1; stamp "ours w2 rc=$?"
timeout 60 ncu --query-metrics --chip gh100 > $OUT/ncu-metrics.txt 2>&1; grep -i nvl $OUT/ncu-metrics.txt > $OUT/ncu-nvl-metrics.txt; stamp "ncu query rc=$?"
for k in fan split; do
timeout 90 ncu --clock-control none -k regex:$k -c 1 --metrics nvltx__bytes.sum,nvltx__bytes_data_user.sum,nvltx__bytes_data_protocol.sum,nvlrx__bytes.sum,nvlrx__bytes_data_user.sum,nvlrx__bytes_data_protocol.sum,gpu__time_duration.sum /tmp/nvlprobe 4 64 prof > $OUT/ncu-$k.log 2>&1; stamp "ncu $k rc=$?"
done
timeout 90 ncu --clock-control none -k regex:fan -c 1 --section Nvlink --section Nvlink_Tables /tmp/nvlprobe 4 64 prof > $OUT/ncu-fan-section.log 2>&1; stamp "ncu section rc=$?"
export MKERNEL_REQUIRE_GPU=1
for t in four_gpus_one_node four_gpus_as_two_and_four_nodes pulled_and_prefetched pushed_partials; do
  timeout 150 $H/bin/test-gpu_gemm_rs --exact $t --test-threads 1 > $OUT/test-gpu_gemm_rs-$t.log 2>&1; stamp "gpu_gemm_rs $t rc=$?"
  grep 'test result' $OUT/test-gpu_gemm_rs-$t.log
done
cat $OUT/probe-w4.log $OUT/probe-w2.log; grep -iE "GB/s|copy" $OUT/ours-w4.log $OUT/ours-w2.log | tail -12
grep -E "nvl|duration" $OUT/ncu-*.log | head -40
