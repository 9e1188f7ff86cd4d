# Session 9, call 6 (4x H200): figures of record at world 4 of the fused ops of issues 9 and 10
# with this session's code (1 x 4 and 2 emulated nodes x 2), beside torch_baselines.py multi.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
bb ag-w4-n1 ag-gemm --world 4 --nodes 1
bb gemm-rs-w4-n1 gemm-rs --world 4 --nodes 1
bb gemm-ar-w4-n1 gemm-ar --world 4 --nodes 1
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
bb ag-w4-n2 ag-gemm --world 4 --nodes 2
bb gemm-rs-w4-n2 gemm-rs --world 4 --nodes 2
bb gemm-ar-w4-n2 gemm-ar --world 4 --nodes 2
python3 $H/summarize-fused.py $L 2>&1 | tail -60
pack
