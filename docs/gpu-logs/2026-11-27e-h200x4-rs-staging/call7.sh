# Call 7 (x4): figures of record of 2cca6dd's GEMM + RS / AR at 1 x 4 and 2 x 2 beside
# torch_baselines.py multi (world 4), same call.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
bb gemm-rs-w4-n1 gemm-rs --world 4 --nodes 1
bb gemm-ar-w4-n1 gemm-ar --world 4 --nodes 1
bb gemm-rs-w4-n2 gemm-rs --world 4 --nodes 2
bb gemm-ar-w4-n2 gemm-ar --world 4 --nodes 2
PYTHONUNBUFFERED=1 timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
pack
