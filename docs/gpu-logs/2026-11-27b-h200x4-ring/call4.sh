# Call 4 (x4): ring attention, one-unit tiles with the mainloop's wgmma descriptors back on the
# uniform datapath (each block loop starts at a constant) and 8 comm CTAs at least:
# gpu_ring_attention, gpu_attention; interleaved twice at 1 x 4: cd4709b (mkernel-cd47), new,
# new with every tile split (the old walk); single-GPU attention, 15602b6 (mkernel-old) against
# new, twice; 2 x 2; torch ring.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
t gpu_ring_attention
t gpu_attention
for r in 1 2; do
  bb mkernel-cd47 ring-cd47-$r ring-attention --world 4
  bb mkernel ring-new-$r ring-attention --world 4
  bb mkernel ring-splitall-$r ring-attention --world 4 --split-tiles 100000
  bb mkernel-old attn-old-$r attention
  bb mkernel attn-new-$r attention
done
bb mkernel ring-new-n2 ring-attention --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring w4 rc=$?"
for f in $L/ring-*.log; do echo "$(basename $f .log): $(grep -h 'one block alone\|time /' $f | grep -v 'rank [123]' | sed 's/.*ring \([0-9.]*\) TFLOP.*alone \([0-9.]*\) -> \([0-9.]*\)x.*/\1\/\2=\3/;s/.*= //' | tr '\n' ' ')"; done
for f in $L/attn-*.log; do echo "$(basename $f .log): $(grep -h 'mkernel' $f | grep -v 'rank [123]' | awk '{print $(NF-2)}' | tr '\n' ' ')"; done
grep -h "TFLOP" $L/torch-ring-w4.log | head -4 | cut -c1-150
pack
