# Session 23, call 3 (4x H200): the reduce-scatter's first-send stagger at 1 x 4, shaped: how
# many of a CTA's first tiles stagger (--stagger-tiles, 2 so far) and over how many CTAs the
# delays cycle (--stagger-group, 8 so far). Correctness of a shaped stagger first (rank-check,
# 20 launches back to back), then bench gemm-rs over the shapes, three rounds interleaved.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for sh in "--stagger-ns 1000 --stagger-tiles 4 --stagger-group 16" "--stagger-ns 2500 --stagger-tiles 3 --stagger-group 8"; do
  timeout 100 $H/bin/mkernel launch -n 4 --gpus 0,1,2,3 --timeout-s 90 -- $H/bin/mkernel rank-check gemm-rs --shape 8192x4096x4096 $sh --back-to-back 20 >> $L/rc.log 2>&1; stamp "rank-check gemm-rs $sh rc=$?"
done
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
V=("t2g8:--stagger-tiles 2 --stagger-group 8 --stagger-ns 2500"
   "t3g8:--stagger-tiles 3 --stagger-group 8 --stagger-ns 2500"
   "t4g8:--stagger-tiles 4 --stagger-group 8 --stagger-ns 2500"
   "t2g16:--stagger-tiles 2 --stagger-group 16 --stagger-ns 1250"
   "t3g16:--stagger-tiles 3 --stagger-group 16 --stagger-ns 1250"
   "t2g16w:--stagger-tiles 2 --stagger-group 16 --stagger-ns 2500"
   "t1g32:--stagger-tiles 1 --stagger-group 32 --stagger-ns 800"
   "t2g32:--stagger-tiles 2 --stagger-group 32 --stagger-ns 800"
   "t4g16:--stagger-tiles 4 --stagger-group 16 --stagger-ns 1250")
for rep in a b c; do
  for v in "${V[@]}"; do bb rs-${v%%:*}-$rep $H/bin/mkernel bench gemm-rs --world 4 $S ${v#*:}; done
done
pack
cat $L/stamps.txt
grep -E "passed|FAIL|error" $L/rc.log | head -6
for f in $L/rs-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
