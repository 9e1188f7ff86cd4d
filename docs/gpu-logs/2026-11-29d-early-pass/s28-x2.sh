# Session 28, call 6 (2x H200, one node; the first multi-GPU machine in four sessions, 431 s of
# device time left): the side pull across GPUs (gpu_moe spare_warps_across_gpus), bench moe at
# 1 x 2 default against --side-pull true, interleaved twice, torch_baselines.py moe beside them,
# then gpu_comm whole at two GPUs (the proxy's bounded shutdown across emulated nodes).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-290}
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
nvidia-smi topo -m > $L/topo.txt 2>&1
timeout 90 $H/bin/test-gpu_moe --exact spare_warps_across_gpus --nocapture > $L/t-spare_warps_across_gpus.log 2>&1; stamp "test spare_warps_across_gpus rc=$?"
bb() { local tag=$1; shift; local l=$(( LIMIT - 100 - SECONDS )); [ $l -gt 45 ] && l=45; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l $H/bin/mkernel bench moe --world 2 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b; do bb def-$rep; bb side-$rep --side-pull true; done
l=$(( LIMIT - 35 - SECONDS )); [ $l -gt 80 ] && l=80
[ $l -gt 20 ] && { PYTHONUNBUFFERED=1 timeout $l python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe w2 rc=$?"; }
l=$(( LIMIT - 3 - SECONDS ))
[ $l -gt 20 ] && { timeout $l $H/bin/test-gpu_comm --test-threads 1 > $L/t-gpu_comm.log 2>&1; stamp "gpu_comm rc=$? (limit $l)"; }
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log
python3 $H/summ.py $L
grep -h "op=moe\|ms" $L/torch-moe-w2.log | tail -6 | cut -c1-200
