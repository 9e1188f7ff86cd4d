# Call 6 (2x H200): world 2, the committed MoE code (b36f79b's binary, same MoE code as HEAD)
# over more pull CTAs with shorter runs (the world-2 lines were tuned over runs of 16-64 only),
# beside the split pull (call 5's build) at the same settings, interleaved, and torch moe.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
bb() { local bin=$1 tag=$2; shift 2; timeout 40 $bin bench moe --world 2 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for k in "8 16" "16 5" "16 8" "24 5" "12 8" "20 6"; do
  set -- $k; bb $O ds-old-$1-$2 $DS --pull-ctas $1 --run-records $2
  [ "$1" = 16 -o "$1" = 24 ] && bb $M ds-new-$1-$2-q2 $DS --pull-ctas $1 --run-records $2 --queue 2
done
for k in "8 16" "12 8" "16 5" "16 8"; do
  set -- $k; bb $O mx-old-$1-$2 $MX --pull-ctas $1 --run-records $2
done
bb $M mx-new-16-8-q2 $MX --pull-ctas 16 --run-records 8 --queue 2
bb $O ds-old-8-16-b $DS --pull-ctas 8 --run-records 16
bb $O ds-old-16-5-b $DS --pull-ctas 16 --run-records 5
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
