# Session 7, call 9 (2x H200): world-2 figures of record of the fused ops at HEAD (binary of
# 7691c54; cc1f796 changed docs only) beside torch_baselines.py multi, same call: the world-2
# tables had last been timed at f9e3a4e (AG) and 05d77a4 (RS / AR), before the world-4 sessions'
# changes to these kernels.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
bb ag-w2-n1 ag-gemm --world 2 --nodes 1
bb gemm-rs-w2-n1 gemm-rs --world 2 --nodes 1
bb gemm-ar-w2-n1 gemm-ar --world 2 --nodes 1
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
python3 $H/summarize-fused.py $L 2>&1 | tail -40
pack
