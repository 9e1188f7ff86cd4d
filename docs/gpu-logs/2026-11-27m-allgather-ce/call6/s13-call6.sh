# Session 13, call 6 (4x H200), HEAD (the landed code: 797a091's host and device code): gpu_comm
# on 4 GPUs, then `bench allgather` by default at world 4 and 2 beside `torch_baselines.py multi`.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4 timeout 200 $H/bin/test-gpu_comm --test-threads=1 --nocapture > $L/gpu_comm.log 2>&1; stamp "gpu_comm rc=$? $(grep -h '^test result' $L/gpu_comm.log | tail -1 | cut -c1-90)"
bb ag-w4-auto-a $M bench allgather --world 4 --sizes 1M,16M,64M,256M
bb ag-w4-autoip-a $M bench allgather --world 4 --sizes 256M --in-place
CUDA_VISIBLE_DEVICES=0,1 bb ag-w2-auto-a $M bench allgather --world 2 --sizes 1M,16M,256M
CUDA_VISIBLE_DEVICES=0,1 bb ag-w2-autoip-a $M bench allgather --world 2 --sizes 256M --in-place
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
python3 $H/agsum.py $L | grep -v "copy-engine-allgather " | tee $L/ag.txt
grep -h all_gather $L/torch-multi-w4.jsonl
pack
