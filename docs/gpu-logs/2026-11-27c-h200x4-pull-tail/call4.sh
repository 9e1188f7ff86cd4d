# Call 4 (x4): mixed copies (half the CTAs push the first half of the shard, the rest pull the
# second half: the SMs' NVLink traffic in both directions) against fan and pull, 256 MiB, world
# 4, interleaved twice; world 2; gpu_comm's all-gather tests with the mixed cases.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
ag() { local tag=$1; shift; timeout 60 $H/bin/mkernel bench allgather --sizes 256M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for r in 1 2; do
  ag w4-fan-c16-$r --world 4 --copy fan --intra-ctas 16
  ag w4-mixed-c16-$r --world 4 --copy mixed --intra-ctas 16
  ag w4-mixed-c24-$r --world 4 --copy mixed --intra-ctas 24
  ag w4-mixed-c32-$r --world 4 --copy mixed --intra-ctas 32
  ag w4-pull-c24-$r --world 4 --copy pull --intra-ctas 24
done
ag w4-mixed-c24-ip --world 4 --copy mixed --intra-ctas 24 --in-place
ag w4-fan-c16-ip --world 4 --copy fan --intra-ctas 16 --in-place
ag w2-bulk-c16 --world 2 --copy bulk --intra-ctas 16
ag w2-mixed-c24 --world 2 --copy mixed --intra-ctas 24
ag w2-mixed-c32 --world 2 --copy mixed --intra-ctas 32
t gpu_comm allgather_four
t gpu_comm allgather_one_node
for f in $L/w*.log; do echo "$(basename $f .log): $(grep -hE '^.rank 0. all_gather' $f | awk '{print $7, $8, $(NF-1)}' | tr '\n' ' ')"; done
pack
