# Session 7, call 3 (2x H200): MoE dispatch blocks (MoeOptions::expert_blocks): gpu_moe (all
# cases, the new expert_blocks among them), then world 2 fused / GEMM alone / dispatch alone for
# blocks 1, 2, 4, 8 (DeepSeek-like) and 1, 2, 4 (Mixtral-like) beside HEAD's binary, twice.
source "$(dirname "$0")/prep.sh"
N=$H/bin/mkernel; O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
export MKERNEL_REQUIRE_GPU=1
timeout 100 $H/bin/test-gpu_moe expert_blocks > $L/test-moe-blocks.log 2>&1; stamp "test moe expert_blocks rc=$?"
tail -3 $L/test-moe-blocks.log
bb() { local tag=$1 X=$2; shift 2; timeout 60 $X bench moe --world 2 --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for i in 1 2; do
  bb ds-old-$i $O $DS
  for b in 1 2 4 8; do bb ds-b$b-$i $N $DS --expert-blocks $b; done
  bb mx-old-$i $O $MX
  for b in 1 2 4; do bb mx-b$b-$i $N $MX --expert-blocks $b; done
done
python3 - <<'PY'
import json, glob, os
print('== moe (ms): fused gemm-alone dispatch-alone fused/max')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    v={}
    for l in open(f):
        r=json.loads(l); v[r['impl']]=r['ms']
    f_=v.get('mkernel-fused',0); m=max(v.get('gemm-alone',0), v.get('dispatch-alone',0)) or 1
    print(os.path.basename(f)[4:-6].ljust(12), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone')), f"{f_/m:.3f}")
PY
timeout 200 $H/bin/test-gpu_moe > $L/test-moe-all.log 2>&1; stamp "test gpu_moe (all) rc=$?"
grep -E "^test |test result" $L/test-moe-all.log | tail -20
pack
