# Session 23, call 7 (4x H200): the walk's lead at 1 x 4 with the all-reduce's new stagger (its
# table says 132 rounds, tuned without it), and the reduce-scatter's lead beside it; f7dc996.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-400}
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  for ld in 66 132 264 all; do bb ar-$ld-$rep $H/bin/mkernel bench gemm-ar --world 4 $S --lead $ld; done
  for ld in 33 66 132; do bb rs-$ld-$rep $H/bin/mkernel bench gemm-rs --world 4 $S --lead $ld; done
done
pack
cat $L/stamps.txt
for f in $L/ar*.log $L/rs*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ')"; done
