# Call 1 (x4): ring attention with one receive slot per step (default W - 1), units that see no
# key skipped, the merge's flag taken by the producer: gpu_ring_attention (new slot cases) and
# gpu_attention; A/B at 1 x 4 against the previous session's binary (mkernel-old), interleaved
# twice: old, new (3 slots), new --slots 2, new --comm-ctas 8; 2 x 2; torch ring.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
t gpu_ring_attention
t gpu_attention
for r in 1 2; do
  bb mkernel-old ring-old-$r ring-attention --world 4
  bb mkernel ring-new-$r ring-attention --world 4
  bb mkernel ring-slots2-$r ring-attention --world 4 --slots 2
  bb mkernel ring-comm8-$r ring-attention --world 4 --comm-ctas 8
done
bb mkernel ring-new-n2 ring-attention --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring w4 rc=$?"
for f in $L/ring-*.log; do echo "$(basename $f): $(grep -h 'one block alone\|time /' $f | grep -v 'rank [123]' | sed 's/.*-> \([0-9.]*\)x.*/\1/' | tr '\n' ' ')"; done
grep -h "TFLOP" $L/torch-ring-w4.log | head -8
pack
