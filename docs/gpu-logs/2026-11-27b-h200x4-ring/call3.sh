# Call 3 (x4): ring attention with tiles as one unit over every step (no merge through memory)
# after a split of tiles walked step by step: gpu_ring_attention (new --split-tiles cases),
# gpu_attention; at 1 x 4, interleaved twice: cd4709b's binary (mkernel-cd47), the new default
# (modelled split), split 0, 512, 1024, every tile (the old walk), the model with 8 comm CTAs;
# 2 x 2 once; single-GPU attention, previous session's binary against the new.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
t gpu_ring_attention
t gpu_attention
for r in 1 2; do
  bb mkernel-cd47 ring-cd47-$r ring-attention --world 4
  bb mkernel ring-new-$r ring-attention --world 4
  bb mkernel ring-split0-$r ring-attention --world 4 --split-tiles 0
  bb mkernel ring-split512-$r ring-attention --world 4 --split-tiles 512
  bb mkernel ring-split1024-$r ring-attention --world 4 --split-tiles 1024
  bb mkernel ring-splitall-$r ring-attention --world 4 --split-tiles 100000
  bb mkernel ring-comm8-$r ring-attention --world 4 --comm-ctas 8
done
bb mkernel ring-new-n2 ring-attention --world 4 --nodes 2
bb mkernel-old attn-old attention
bb mkernel attn-new attention
for f in $L/ring-*.log; do echo "$(basename $f .log): $(grep -h 'one block alone\|time /' $f | grep -v 'rank [123]' | sed 's/.*alone [0-9.]* -> \([0-9.]*\)x.*/\1/;s/.*= //' | tr '\n' ' ')"; done
grep -h "TFLOP" $L/attn-*.log | grep -v 'rank [123]' | cut -c1-110 | head -16
pack
