# Session 8, call 1 (2x H200): verify branch moe-early-layout (38ea0ac): gpu_moe (all cases,
# MKERNEL_REQUIRE_GPU=1) on the branch, then bench moe at world 2 (DeepSeek-like, Mixtral-like),
# branch (mkernel) against main e4f11f2 (mkernel-old), interleaved, twice.
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old; NEW=$H/bin/mkernel
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe --test-threads=1 > $L/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
tail -5 $L/test-gpu_moe.log
bb() { local tag=$1 X=$2 W=$3; shift 3; timeout 60 $X bench moe --world $W --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for i in 1 2; do
  bb w2-ds-main-$i $O 2 $DS; bb w2-ds-early-$i $NEW 2 $DS
  bb w2-mx-main-$i $O 2 $MX; bb w2-mx-early-$i $NEW 2 $MX
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
