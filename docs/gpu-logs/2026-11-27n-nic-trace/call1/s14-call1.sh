# Session 14, call 1 (4x H200): (a) the review fixes 90811e6/e55162d and the entering launch's
# wait for a whole report, on GPUs: gpu_comm on 4 GPUs (new: absent rank 3 at 2 x 2, lsu and ce),
# gpu_selftest; (b) a traced build of the emulated NIC (every post: host time, the GPU's push
# time, the wire's idle time; every flag: how late) under AllGather + GEMM and GEMM + RS at
# 2 x 1 and 2 x 2, 16384x4096x8192: where the time above the modelled link goes.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; MT=$H/bin/mkernel-trace
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
tr() { local tag=$1; shift; mkdir -p $L/tr-$tag; MK_NIC_TRACE=$L/tr-$tag bb $tag "$@"; }
S="--shapes 16384x4096x8192"
CUDA_VISIBLE_DEVICES=0,1 tr agg21 $MT bench ag-gemm --world 2 --nodes 2 $S
tr agg22 $MT bench ag-gemm --world 4 --nodes 2 $S
tr agg22ip $MT bench ag-gemm --world 4 --nodes 2 $S --in-place
tr rs22 $MT bench gemm-rs --world 4 --nodes 2 $S
for t in gpu_comm gpu_selftest; do
  MKERNEL_REQUIRE_GPUS=4 timeout 400 $H/bin/test-$t --test-threads 1 --nocapture > $L/$t.log 2>&1
  stamp "$t rc=$? $(grep 'test result' $L/$t.log)"
done
python3 $H/nictrace.py $L | tee $L/nictrace.txt | tail -40
pack
