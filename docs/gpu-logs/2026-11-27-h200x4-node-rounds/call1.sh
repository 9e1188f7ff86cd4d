# Call 1 (x4), binaries of 6ce14ed: the GPU rerun of last session's device tidy (gpu_ag_gemm) and
# host tidy (gemm_rs option resolution: reduce_scatter_pushed); the first GPU runs of
# `tune --rounds`: tune moe at 1 x 4 (its world-4 lines predate the compute CTAs' help) and tune
# ag-gemm at 1 x 4 on the two missed shapes; the all-gather's fan copy over 12-32 CTAs at world 4.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
t gpu_ag_gemm
t gpu_gemm_rs reduce_scatter_pushed
for c in 12 16 24 32; do
  timeout 60 $M bench allgather --world 4 --sizes 256M --copy fan --intra-ctas $c --json $L/ag-fan-c$c.jsonl > $L/ag-fan-c$c.log 2>&1; stamp "allgather fan $c rc=$?"
done
timeout 260 $M tune moe --world 4 --pull-ctas 4,8,12,16 --run-records 16,32 --reps 10 --warmup 3 --rounds 3 --out $L/tune-moe-w4.jsonl > $L/tune-moe-w4.log 2>&1; stamp "tune moe w4 rc=$?"
timeout 200 $M tune ag-gemm --world 4 --shapes 16384x4096x8192,32768x4096x8192 --push-ctas 6,8,11 --chunk-rows 128,256 --reps 10 --warmup 3 --rounds 3 --out $L/tune-ag-w4.jsonl > $L/tune-ag-w4.log 2>&1; stamp "tune ag w4 rc=$?"
grep -hE "GB/s" $L/ag-fan-c*.log | cut -c1-150
tail -5 $L/tune-moe-w4.log $L/tune-ag-w4.log
pack
