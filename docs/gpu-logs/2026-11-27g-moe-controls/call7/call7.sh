# Session 7, call 7 (4x H200): MoE control: the x_heap copy of own tokens skipped (peers read
# whatever the first launch left there: the bench's tokens never change, so the timing is what
# an in-place x would give), beside HEAD; 1 x 4 and 1 x 2; twice.
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old; NX=$H/bin/mkernel-noxcopy
rm -f $L/*.log $L/*.jsonl
bb() { local tag=$1 X=$2 W=$3; shift 3; timeout 60 $X bench moe --world $W --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for i in 1 2; do for w in 4 2; do
  bb w$w-ds-head-$i $O $w $DS; bb w$w-ds-noxcopy-$i $NX $w $DS
  bb w$w-mx-head-$i $O $w $MX; bb w$w-mx-noxcopy-$i $NX $w $MX
done; done
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
