# Call 1 (x4): the all-gather pulling (COPY_PULL: each rank's CTAs read every local peer's shard,
# reads interleaved) against fan / bulk pushes, 256 MiB, world 4 and world 2; gpu_comm's
# all-gather tests with the pull cases.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
ag() { local tag=$1; shift; timeout 60 $M bench allgather --sizes 256M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for c in 8 16 24 32; do ag w4-pull-c$c --world 4 --copy pull --intra-ctas $c; done
ag w4-fan-c16 --world 4 --copy fan --intra-ctas 16
ag w4-pull-c16-ip --world 4 --copy pull --intra-ctas 16 --in-place
ag w4-fan-c16-ip --world 4 --copy fan --intra-ctas 16 --in-place
for c in 16 24; do ag w2-pull-c$c --world 2 --copy pull --intra-ctas $c; done
ag w2-bulk-c16 --world 2 --copy bulk --intra-ctas 16
ag w4-pull-c16-b --world 4 --copy pull --intra-ctas 16
ag w4-fan-c16-b --world 4 --copy fan --intra-ctas 16
t gpu_comm allgather_four
t gpu_comm allgather_one_node
t gpu_comm allgather_two_nodes
for f in $L/w*.log; do echo "$(basename $f .log): $(grep -hE 'GB/s' $f | grep -v '^rank' | cut -c1-160 | tr '\n' '|')"; done
pack
