# Call 4 (x4): ring attention's merge with its loads in flight together (attention::finish_tile),
# A/B against call 2's binary (mkernel-old) at 1 x 4, interleaved twice, beside torch ring; its
# tests and the single-GPU attention's; then the figures of record of GEMM + RS / AR (2 x 2 on the
# rounds walk with call 3's table, 1 x 4) and AllGather + GEMM (1 x 4 with call 1's table, 2 x 2)
# beside torch multi.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for r in 1 2; do
  bb mkernel-old ring-old-$r ring-attention --world 4
  bb mkernel ring-new-$r ring-attention --world 4
done
bb mkernel ring-new-n2 ring-attention --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring w4 rc=$?"
t gpu_ring_attention
t gpu_attention
for r in 1 2; do
  bb mkernel-old attn-old-$r attention
  bb mkernel attn-new-$r attention
done
bb mkernel gemm-rs-w4-n2 gemm-rs --world 4 --nodes 2
bb mkernel gemm-ar-w4-n2 gemm-ar --world 4 --nodes 2
bb mkernel gemm-rs-w4-n1 gemm-rs --world 4 --nodes 1
bb mkernel gemm-ar-w4-n1 gemm-ar --world 4 --nodes 1
bb mkernel ag-w4-n1 ag-gemm --world 4 --nodes 1
bb mkernel ag-w4-n2 ag-gemm --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
for f in $L/ring-*.log; do echo "$(basename $f): $(grep -h 'one block alone\|time /' $f | grep -v 'rank [123]' | sed 's/.*-> \([0-9.]*\)x.*/\1/' | tr '\n' ' ')"; done
grep -h "TFLOP" $L/attn-*.log | grep -v 'rank [123]' | cut -c1-120 | head -24
grep -hE "overlap eff|modelled|time /" $L/gemm-*.log $L/ag-*.log | cut -c1-150
pack
