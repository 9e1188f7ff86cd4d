# Call 7 (2x H200): the world-2 DeepSeek-like line, committed MoE code (b36f79b's binary): the
# table's 8 / 16 against 20 / 6 and 24 / 5 (best in call 6), interleaved twice, beside torch moe.
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
bb() { local tag=$1; shift; timeout 40 $O bench moe --world 2 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"
for i in 1 2; do for k in "8 16" "20 6" "24 5"; do set -- $k; bb ds-$1-$2-$i $DS --pull-ctas $1 --run-records $2; done; done
PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe rc=$?"
python3 - <<'PY'
import json, glob, os
rows={}
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    for l in open(f):
        r=json.loads(l)
        if 'torch' in f: print('torch', r.get('tokens_per_rank'), r.get('experts'), f"{r['torch_ms']:.3f}", f"disp {r['dispatch_alone_ms']:.3f} gemm {r['gemm_alone_ms']:.3f}"); continue
        rows.setdefault(os.path.basename(f)[:-6],{})[r['impl']]=r['ms']
print('tag'.ljust(18), 'fused', 'gemm', 'disp')
for t,v in rows.items(): print(t.ljust(18), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone')))
PY
pack
