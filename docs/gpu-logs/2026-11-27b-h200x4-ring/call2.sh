# Call 2 (x4): ring attention, the slot fixes (at least two slots when K/V is passed on) and the
# comm-CTA rule (8 for 4 x 16 x 8192 causal): gpu_ring_attention; then where the rest of the gap
# to one block goes, with diagnostic builds (wrong results by design): no merge traffic, no
# NVLink copy, neither; interleaved twice at 1 x 4; 2 x 2 once.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
t gpu_ring_attention
for r in 1 2; do
  bb mkernel ring-new-$r ring-attention --world 4
  bb mkernel-nomerge ring-nomerge-$r ring-attention --world 4
  bb mkernel-nocopy ring-nocopy-$r ring-attention --world 4
  bb mkernel-nomerge-nocopy ring-neither-$r ring-attention --world 4
done
bb mkernel ring-new-n2 ring-attention --world 4 --nodes 2
for f in $L/ring-*.log; do echo "$(basename $f): $(grep -h 'one block alone\|time /' $f | grep -v 'rank [123]' | sed 's/.*alone [0-9.]* -> \([0-9.]*\)x.*/\1/;s/.*= //' | tr '\n' ' ')"; done
pack
