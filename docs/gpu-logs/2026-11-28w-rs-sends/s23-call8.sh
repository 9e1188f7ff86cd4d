# Session 23, call 8 (4x H200): ramped groups of node partials across emulated nodes (each
# block's first WRITEs 1, 2, 4, 8 tiles, then the group; --group-ramp), so the link starts once
# a block's first tile is collected (traced earlier: the first WRITE left 51-99 us after the
# ready SIGNAL). Correctness first (rank-check at 2 x 2 and 4 x 1), then bench gemm-rs and
# gemm-ar at 2 x 2, ramp off / on interleaved three times.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rc() { local nodes=$1; shift; timeout 120 $H/bin/mkernel launch -n 4 --nodes $nodes --gpus 0,1,2,3 --timeout-s 110 -- $H/bin/mkernel rank-check "$@" >> $L/rc.log 2>&1; stamp "rank-check $nodes nodes $* rc=$?"; }
for op in gemm-rs gemm-ar; do
  rc 2 $op --shape 8192x4096x4096 --group-ramp on --group 16 --back-to-back 20
  rc 4 $op --shape 4000x1544x1024 --group-ramp on --group 16 --f32 --rounds 2
done
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096"
for rep in a b c; do
  for op in rs ar; do
    for r in false true; do bb $op-$r-$rep $H/bin/mkernel bench gemm-$op --world 4 --nodes 2 $S --group-ramp $r; done
  done
done
pack
cat $L/stamps.txt
grep -cE "within the precision contract" $L/rc.log
for f in $L/rs-*.log $L/ar-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ')"; done
