# Call 5 (x4): ring attention across emulated nodes with every tile split (the NIC sets every
# rank's pace): 2 x 2 and 4 x 1 against the link model; world 2 (1 x 2 against cd4709b, and
# 2 x 1) beside torch ring at world 2.
source "$(dirname "$0")/prep.sh"
W2="CUDA_VISIBLE_DEVICES=0,1"
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
bb mkernel ring-w4-n2 ring-attention --world 4 --nodes 2
bb mkernel ring-w4-n4 ring-attention --world 4 --nodes 4
bb mkernel-cd47 ring-cd47-w2 ring-attention --world 2
bb mkernel ring-w2 ring-attention --world 2
bb mkernel ring-w2-n2 ring-attention --world 2 --nodes 2
env $W2 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w2.jsonl > $L/torch-ring-w2.log 2>&1; stamp "torch ring w2 rc=$?"
for f in $L/ring-*.log; do echo "$(basename $f .log): $(grep -h 'one block alone\|time /' $f | grep -v 'rank [1-9]' | sed 's/.*ring \([0-9.]*\) TFLOP.*alone \([0-9.]*\) -> \([0-9.]*\)x.*/\1\/\2=\3/;s/.*= //' | tr '\n' ' ')"; done
grep -h "torch_ring_tflops" $L/torch-ring-w2.log | sed 's/.*s_per_rank=\([0-9]*\).*causal=\([A-Za-z]*\).*torch_ring_ms=\([0-9.]*\).*torch_ring_tflops_per_gpu=\([0-9.]*\).*/\1 \2 \3 \4/'
pack
