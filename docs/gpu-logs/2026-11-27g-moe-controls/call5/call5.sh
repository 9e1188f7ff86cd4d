# Session 7, call 5 (2x H200): the MoE's gathering producer on 56 registers (WIDE_PRODUCER, as the
# gathered GEMM has) against HEAD's 40, gathered, beside HEAD laid out; world 2, both layouts
# for the DeepSeek-like config; twice.
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old; WD=$H/bin/mkernel-wide
rm -f $L/*.log $L/*.jsonl
bb() { local tag=$1 X=$2; shift 2; timeout 60 $X bench moe --world 2 --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for i in 1 2; do
  for l in kn nk; do
    bb ds-$l-laid-$i $O $DS --layouts $l; bb ds-$l-gath40-$i $O $DS --layouts $l --gather; bb ds-$l-gath56-$i $WD $DS --layouts $l --gather
  done
  bb mx-kn-laid-$i $O $MX; bb mx-kn-gath40-$i $O $MX --gather; bb mx-kn-gath56-$i $WD $MX --gather
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
