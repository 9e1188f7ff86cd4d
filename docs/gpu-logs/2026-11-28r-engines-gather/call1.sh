# Session 18, call 1 (4x H200): (1) does NVLink traffic slow a GEMM whoever moves it (the copy
# engines, interfere.py) and in which direction; (2) bench gemm-rs at 1 x 4 for the same call's
# fused / GEMM alone; (3) AllGather + GEMM at 2 x 2 timed after the host barrier and after a
# device barrier, interleaved twice; (4) the tests not yet run on 07e9e32's code: gpu_ag_gemm
# one_node_two_gpus (the new 1 x 2 arrival-tail case) and gpu_gemm_rs two_ranks_sharing_one_gpu.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
nvidia-smi --query-gpu=index,name,clocks.max.sm,power.limit --format=csv > $L/smi.txt 2>&1
timeout 150 python3 $H/interfere.py 16384x4096x2048 16384x8192x2048 > $L/interfere.txt 2>&1; stamp "interfere rc=$?"
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
bb() { local tag=$1; shift; timeout 90 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
bb gemm-rs-w4-n1 gemm-rs --world 4 $S
for rep in a b; do
  bb n2w4-host-$rep ag-gemm --world 4 --nodes 2 $S
  bb n2w4-dev-$rep ag-gemm --world 4 --nodes 2 $S --device-barrier
done
python3 $H/tailab.py $L > $L/ab.txt
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
MKERNEL_REQUIRE_GPUS=2 CUDA_VISIBLE_DEVICES=0,1 t gpu_ag_gemm 170 one_node_two_gpus
rem=$((560 - SECONDS)); [ $rem -gt 30 ] && t gpu_gemm_rs $((rem < 90 ? rem : 90)) two_ranks_sharing_one_gpu
pack
cat $L/interfere.txt; cat $L/ab.txt
python3 - <<'P'
import json
for l in open('/tmp/logs/gemm-rs-w4-n1.jsonl'):
    x=json.loads(l); print(x['shape'], x['impl'], round(x['ms'],4))
P
