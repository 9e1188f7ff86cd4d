# Session 11, call 5 (4x H200): figures of record for GEMM + RS / AR with the staged partial
# (the default shapes, world 2 on GPUs 0,1 and 1 x 4, twice) beside torch_baselines.py multi.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in "" r2-; do
  for op in gemm-rs gemm-ar; do bb ${rep}$op-w4-n1 $op --world 4; done
  for op in gemm-rs gemm-ar; do CUDA_VISIBLE_DEVICES=0,1 bb ${rep}$op-w2-n1 $op --world 2; done
done
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
CUDA_VISIBLE_DEVICES=0,1 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
for w in 2 4; do cp $L/torch-multi-w$w.jsonl $L/r2-torch-multi-w$w.jsonl; done
python3 $H/summarize-fused.py $L > $L/summary.txt 2>&1; python3 $H/summarize-fused.py $L r2- > $L/summary-r2.txt 2>&1
cat $L/summary.txt $L/summary-r2.txt | grep -v '^$' | cut -c1-200
pack
