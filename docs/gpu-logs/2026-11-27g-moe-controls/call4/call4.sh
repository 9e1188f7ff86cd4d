# Session 7, call 4 (2x H200): MoE control: compute tiles that do not wait for their rows (wrong
# results; timing only) beside HEAD, world 2, fused / GEMM alone / dispatch alone, twice.
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old; NW=$H/bin/mkernel-nowait
rm -f $L/*.log $L/*.jsonl
bb() { local tag=$1 X=$2; shift 2; timeout 60 $X bench moe --world 2 --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for i in 1 2; do
  bb ds-head-$i $O $DS; bb ds-nowait-$i $NW $DS; bb ds-nowait-nohelp-$i $NW $DS --no-helpers; bb ds-head-nohelp-$i $O $DS --no-helpers
  bb mx-head-$i $O $MX; bb mx-nowait-$i $NW $MX
done
python3 - <<'PY'
import json, glob, os
print('== moe (ms): fused gemm-alone dispatch-alone fused/gemm')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    v={}
    for l in open(f):
        r=json.loads(l); v[r['impl']]=r['ms']
    print(os.path.basename(f)[4:-6].ljust(20), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone')), f"{v['mkernel-fused']/v['gemm-alone']:.3f}")
PY
pack
