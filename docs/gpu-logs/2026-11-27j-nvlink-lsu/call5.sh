# Session 10, call 5 (4x H200): final all-gather defaults (`auto`: lsu on 64 CTAs from 8 MiB
# shards, fan / bulk on 16 below) beside the copy engine and NCCL (torch_baselines.py multi);
# AllGather + GEMM at 1 x 4 (its unfused path runs the new all-gather); gpu_comm on 4 GPUs.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
ag() { local tag=$1; shift; timeout 90 $M bench allgather --sizes 1M,16M,256M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in 1 2; do ag w4-auto-r$rep --world 4; ag w4-auto-inplace-r$rep --world 4 --in-place; done
ag w4-auto-dev --world 4 --device-barrier
timeout 150 $M bench ag-gemm --world 4 --nodes 1 --json $L/ag-gemm-w4-n1.jsonl > $L/ag-gemm-w4-n1.log 2>&1; stamp "ag-gemm rc=$?"
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
export CUDA_VISIBLE_DEVICES=0,1
for rep in 1 2; do ag w2-auto-r$rep --world 2; done
ag w2-auto-dev --world 2 --device-barrier
PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --shapes 16384x4096x8192 --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
unset CUDA_VISIBLE_DEVICES
export MKERNEL_REQUIRE_GPU=1
timeout 200 $H/bin/test-gpu_comm --test-threads 1 > $L/test-gpu_comm.log 2>&1; stamp "gpu_comm rc=$?"
grep -E "^test |test result" $L/test-gpu_comm.log | cut -c1-150
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/w*.jsonl')):
    rs=[json.loads(l) for l in open(f)]
    print(os.path.basename(f)[:-6].ljust(20), ' '.join(f"{r['shape']}:{r['impl'].replace('copy-engine-','ce-')}{'/'+r.get('copy','')+str(r.get('intra_ctas','')) if r['impl']=='mkernel' else ''}={r['gbps']:.0f}" for r in rs if r['impl'] in ('mkernel','copy-engine-p2p','copy-engine-allgather-stepped')))
for f in glob.glob('/tmp/logs/torch-multi-w*.jsonl'):
    for l in open(f):
        r=json.loads(l)
        if r.get('op')=='all_gather': print(os.path.basename(f), r['bytes'], 'nccl busbw', round(r['busbw_gbps'],1))
PY
python3 $H/summarize-fused.py $L 2>&1 | tail -12
pack
