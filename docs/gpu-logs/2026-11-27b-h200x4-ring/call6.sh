# Call 6 (x4, one GPU used for the single-GPU rows): final binaries. gpu_ring_attention and
# gpu_attention; the single-GPU attention beside cuDNN / FA2: `bench attention` then
# `torch_baselines.py single` (5 + 20 launches), and the sustained state (`--warmup 50 --reps
# 200` beside cudnn_steady.py).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
rm -f $L/*.log $L/*.jsonl
t gpu_ring_attention
t gpu_attention
CUDA_VISIBLE_DEVICES=0 timeout 100 $H/bin/mkernel bench attention --json $L/attn.jsonl > $L/attn.log 2>&1; stamp "attn rc=$?"
CUDA_VISIBLE_DEVICES=0 PYTHONUNBUFFERED=1 timeout 200 python3 $H/torch_baselines.py single --json $L/torch-single.jsonl > $L/torch-single.log 2>&1; stamp "torch single rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 100 $H/bin/mkernel bench attention --warmup 50 --reps 200 --json $L/attn-steady.jsonl > $L/attn-steady.log 2>&1; stamp "attn steady rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 100 python3 $H/cudnn_steady.py $L/cudnn-steady.jsonl > $L/cudnn-steady.log 2>&1; stamp "cudnn steady rc=$?"
grep -h "mkernel" $L/attn.log $L/attn-steady.log | awk '{print $2, $5, $(NF-2)}'
grep -h '"op": "attention"\|"op":"attention"' $L/torch-single.jsonl | python3 -c 'import sys,json
for l in sys.stdin:
    d=json.loads(l); print(d.get("impl"), d.get("b"), d.get("h"), d.get("s"), d.get("d"), d.get("causal"), round(d.get("tflops",0),1))'
cat $L/cudnn-steady.jsonl | python3 -c 'import sys,json
for l in sys.stdin:
    d=json.loads(l); print("steady", d)' | cut -c1-200
pack
