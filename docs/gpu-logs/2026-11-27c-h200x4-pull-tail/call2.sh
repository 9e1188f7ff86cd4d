# Call 2 (x4): stepped copies (every CTA of a rank on the same peer, peer after peer: a ring
# shift at each step) against all-at-once, pull and bulk push, 256 MiB, world 4, interleaved
# twice; gpu_comm's all-gather tests with the stepped cases.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
ag() { local tag=$1; shift; timeout 60 $M bench allgather --sizes 256M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for r in 1 2; do
  ag w4-fan-c16-$r --world 4 --copy fan --intra-ctas 16
  ag w4-pullst-c16-$r --world 4 --copy pull --stepped --intra-ctas 16
  ag w4-pullst-c24-$r --world 4 --copy pull --stepped --intra-ctas 24
  ag w4-bulkst-c16-$r --world 4 --copy bulk --stepped --intra-ctas 16
  ag w4-bulkst-c24-$r --world 4 --copy bulk --stepped --intra-ctas 24
  ag w4-bulk-c16-$r --world 4 --copy bulk --intra-ctas 16
done
ag w4-pullst-c16-ip --world 4 --copy pull --stepped --intra-ctas 16 --in-place
ag w4-bulkst-c16-ip --world 4 --copy bulk --stepped --intra-ctas 16 --in-place
ag w2-pullst-c16 --world 2 --copy pull --stepped --intra-ctas 16
ag w2-bulk-c16 --world 2 --copy bulk --intra-ctas 16
t gpu_comm allgather_four
t gpu_comm allgather_one_node
for f in $L/w*.log; do echo "$(basename $f .log): $(grep -hE '^.rank 0. all_gather' $f | awk '{print $6, $7, $9}' | tr '\n' ' ')"; done
pack
