# Session 8, call 6 (2x H200): MoE figures of record at 145ddfa (compute CTAs copy x early) beside
# torch_baselines.py moe in the same call: bench moe world 2 (both configs, tuned defaults) twice,
# then the DeepSeek-like config with 32 tokens per x_heap copy item (default 64), then torch.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
rm -f $L/*.log $L/*.jsonl
for i in 1 2; do timeout 60 $M bench moe --world 2 --nodes 1 --json $L/moe-w2-$i.jsonl > $L/moe-w2-$i.log 2>&1; stamp "moe w2 $i rc=$?"; done
timeout 60 $M bench moe --world 2 --configs 4096x7168x2048x256x8 --chunk-tokens 32 --json $L/moe-w2-ds-ct32.jsonl > $L/moe-w2-ds-ct32.log 2>&1; stamp "moe ct32 rc=$?"
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe rc=$?"
python3 - <<'PY'
import json, glob, os
print('== moe (ms): config fused gemm-alone dispatch-alone unfused fused/gemm')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r.get('config', r.get('shape','?')),{})[r['impl']]=r['ms']
    for c,v in R.items():
        print(os.path.basename(f)[4:-6].ljust(14), str(c).ljust(26), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone','mkernel-unfused')), f"{v['mkernel-fused']/v['gemm-alone']:.3f}")
PY
grep op= $L/torch-moe-w2.log
pack
