# Session 15, call 2 (2x H200): where the all-reduce's second phase costs, at HEAD (4e946eb):
# diagnostic builds (wrong results, timing only) that skip the owner's stores of its reduced
# tiles into the other rank's output everywhere (noar2), everywhere but the last wave (lastonly),
# or only in the last wave (nolast); the reduce-scatter beside them. Interleaved three times.
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1 bin=$2; shift 2; timeout 100 $bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b c; do
  for v in head noar2 lastonly nolast; do bin=$H/bin/mkernel-$v; [ $v = head ] && bin=$H/bin/mkernel
    bb $v-$rep-gemm-ar-w2 $bin gemm-ar --world 2
  done
  bb head-$rep-gemm-rs-w2 $H/bin/mkernel gemm-rs --world 2
done
python3 $H/ab.py $L | tee $L/ab.txt
pack
