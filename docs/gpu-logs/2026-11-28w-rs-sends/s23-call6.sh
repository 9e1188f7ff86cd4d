# Session 23, call 6 (4x H200): the all-reduce's first sends staggered by default at 1 x 4 (this
# session's rule). gpu_gemm_rs four_gpus_one_node (with the new all-reduce cases: 3 us asked,
# and the default at 16384x4096x8192, 20 launches back to back), then bench gemm-ar and gemm-rs
# at 1 x 4 (the default knobs) twice beside torch_baselines.py multi.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
timeout 330 $H/bin/test-gpu_gemm_rs --test-threads 1 four_gpus_one_node > $L/test-four.log 2>&1; stamp "test four_gpus_one_node rc=$?"
for rep in a b; do
  bb ar-$rep $H/bin/mkernel bench gemm-ar --world 4
  bb rs-$rep $H/bin/mkernel bench gemm-rs --world 4
done
l=$(( LIMIT - SECONDS )); [ $l -gt 100 ] && l=100
[ $l -gt 20 ] && { timeout $l python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"; }
pack
cat $L/stamps.txt
grep -E "test result|panicked|FAILED" $L/test-four.log | head -5
for f in $L/ar-*.log $L/rs-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep -E "op=gemm_ar|op=gemm_rs" $L/torch-multi-w4.log | sed 's/nccl_cublas/seq/' | cut -c1-200
