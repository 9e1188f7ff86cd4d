# Session 24, call 10 (2x H200): the copy engines against the default at 1 x 2 where a default
# rule would apply, beside torch_baselines.py multi: gemm-rs and gemm-ar (engine tail 1), six
# shapes (the four large, 8192x4096x4096 and 2048x4096x4096), two rounds interleaved.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-330}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - 110 - SECONDS )); [ $l -gt 60 ] && l=60; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,8192x4096x4096,2048x4096x4096"
for rep in a b; do
  for op in gemm-rs gemm-ar; do
    bb $op-def-$rep $H/bin/mkernel bench $op --world 2 $S
    bb $op-ce-$rep $H/bin/mkernel bench $op --world 2 $S --engines on --one-shot off
  done
done
l=$(( LIMIT - 10 - SECONDS )); [ $l -gt 100 ] && l=100
[ $l -gt 20 ] && { timeout $l python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"; }
pack
cat $L/stamps.txt
for f in $L/gemm-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep -E "op=gemm_ar|op=gemm_rs" $L/torch-multi-w2.log | sed 's/nccl_cublas/seq/' | cut -c1-200
