# Session 23, call 5 (4x H200): the all-reduce's first-send stagger at 1 x 4 again (call 4: 2.5 us
# about 1% faster at six of eight points), four rounds of 0 / 2.5 / 4 us interleaved, NCCL beside.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096"
for rep in a b c d; do
  for ns in 0 2500 4000; do bb ar4-$ns-$rep $H/bin/mkernel bench gemm-ar --world 4 $S --stagger-ns $ns; done
done
timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
pack
cat $L/stamps.txt
for f in $L/ar*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep -E "op=gemm_ar" $L/torch-multi-w4.log | sed 's/nccl_cublas/seq/' | cut -c1-160
