# Session 23, call 9 (2x H200: the 4-GPU kind was no longer lent): an L2 evict-first policy on the
# send tiles' bulk copies of partials (mkernel-ef = da88fcb + call9-send-evict-first.diff), against
# da88fcb (mkernel): gemm-rs and gemm-ar at world 2 (owners pull: the copies go to the local
# outbox), three rounds interleaved, and gemm-rs --push true (copies over NVLink into the owner's
# inbox, as at 1 x 4) twice; rank-checks first.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-480}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for op in gemm-rs gemm-ar; do
  timeout 150 $H/bin/mkernel-ef launch -n 2 --gpus 0,1 --timeout-s 140 -- $H/bin/mkernel-ef rank-check $op --shape 16384x4096x8192 --one-shot false --back-to-back 10 >> $L/rc.log 2>&1; stamp "rank-check ef $op rc=$?"
done
timeout 150 $H/bin/mkernel-ef launch -n 2 --gpus 0,1 --timeout-s 140 -- $H/bin/mkernel-ef rank-check gemm-rs --shape 16384x4096x8192 --push true --back-to-back 10 >> $L/rc.log 2>&1; stamp "rank-check ef gemm-rs push rc=$?"
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b c; do
  for v in mkernel mkernel-ef; do
    bb rs-$v-$rep $H/bin/$v bench gemm-rs --world 2 $S
    bb ar-$v-$rep $H/bin/$v bench gemm-ar --world 2 $S
  done
done
for rep in a b; do
  for v in mkernel mkernel-ef; do bb rspush-$v-$rep $H/bin/$v bench gemm-rs --world 2 $S --push true; done
done
pack
cat $L/stamps.txt
grep -cE "within the precision contract" $L/rc.log
for f in $L/rs*.log $L/ar-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ')"; done
