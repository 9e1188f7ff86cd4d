# Session 24, call 8 (2x H200): the all-reduce's last bands pushed by the helpers with the copy
# engines on (--engine-tail; default 1): bench gemm-ar at 1 x 2, default / engines with tails 0,
# 1, 2, three rounds interleaved; then gpu_gemm_rs copy_engines (1 x 2, with the tail cases).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
bb() { local tag=$1; shift; local l=$(( LIMIT - 200 - SECONDS )); [ $l -gt 60 ] && l=60; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b c; do
  bb gemm-ar-def-$rep $H/bin/mkernel bench gemm-ar --world 2 $S
  for t in 0 1 2; do bb gemm-ar-cet$t-$rep $H/bin/mkernel bench gemm-ar --world 2 $S --engines on --engine-tail $t; done
done
l=$(( LIMIT - 15 - SECONDS ))
[ $l -gt 30 ] && { timeout $l $H/bin/test-gpu_gemm_rs --exact copy_engines --nocapture > $L/test-ce.log 2>&1; stamp "test copy_engines rc=$?"; }
pack
cat $L/stamps.txt
grep -E "test result|panicked|FAILED" $L/test-ce.log 2>/dev/null | head -5
for f in $L/gemm-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
