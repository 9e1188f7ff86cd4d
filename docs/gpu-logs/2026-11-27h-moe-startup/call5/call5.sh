# Session 8, call 5 (2x H200): with the x_heap copy on the compute CTAs (145ddfa), re-tune the MoE's
# pull CTAs x records per run at world 2 (narrow sweeps around the old defaults, 2 rounds), and
# time the gathering producer (--gather) and no helpers on the same binary.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
rm -f $L/*.log $L/*.jsonl
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
timeout 200 $M tune moe --world 2 $DS --pull-ctas 12,16,20 --run-records 4,6,12 --rounds 2 --out $L/tune-ds.jsonl > $L/tune-ds.log 2>&1; stamp "tune ds rc=$?"
timeout 150 $M tune moe --world 2 $MX --pull-ctas 4,6,8,12 --run-records 16,32 --rounds 2 --out $L/tune-mx.jsonl > $L/tune-mx.log 2>&1; stamp "tune mx rc=$?"
tail -25 $L/tune-ds.log; tail -15 $L/tune-mx.log
bb() { local tag=$1; shift; timeout 60 $M bench moe --world 2 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
bb ds-default $DS; bb ds-gather $DS --gather; bb ds-nohelp $DS --no-helpers
bb mx-default $MX; bb mx-gather $MX --gather
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
