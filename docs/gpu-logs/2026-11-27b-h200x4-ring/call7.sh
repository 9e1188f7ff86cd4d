# Call 7 (x4): the review's tidy (attn_tiles::Units::span on sched::div_nz / rem_nz, no unused
# Units::tiles): gpu_ring_attention and gpu_attention on the new binaries; ring at 1 x 4 and the
# single-GPU attention, 7b366a9's binary (mkernel-7b36) against the new, one run each.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
t gpu_ring_attention
t gpu_attention
bb mkernel-7b36 ring-7b36 ring-attention --world 4
bb mkernel ring-new ring-attention --world 4
CUDA_VISIBLE_DEVICES=0 bb mkernel-7b36 attn-7b36 attention
CUDA_VISIBLE_DEVICES=0 bb mkernel attn-new attention
for f in $L/ring-*.log; do echo "$(basename $f .log): $(grep -h 'one block alone' $f | grep -v 'rank [123]' | sed 's/.*ring \([0-9.]*\) TFLOP.*alone \([0-9.]*\) -> \([0-9.]*\)x.*/\1\/\2=\3/' | tr '\n' ' ')"; done
for f in $L/attn-*.log; do echo "$(basename $f .log): $(grep -h 'mkernel' $f | grep -v 'rank [123]' | awk '{print $(NF-2)}' | tr '\n' ' ')"; done
pack
