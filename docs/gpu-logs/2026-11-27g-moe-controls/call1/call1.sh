# Session 7, call 1 (2x H200): the gathering producer loading one-row TMA boxes (new) against
# HEAD's cp.async gather (old): correctness, the gathered GEMM beside the plain one and cuBLAS,
# and the MoE at world 2 laid out / gathered.
source "$(dirname "$0")/prep.sh"
N=$H/bin/mkernel; O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
export MKERNEL_REQUIRE_GPU=1
timeout 120 $H/bin/test-gpu_gemm_gather > $L/test-gemm-gather.log 2>&1; stamp "test gemm_gather rc=$?"
tail -3 $L/test-gemm-gather.log
timeout 150 $H/bin/test-gpu_moe own_tokens_gathered > $L/test-moe-gathered.log 2>&1; stamp "test moe gathered rc=$?"
tail -3 $L/test-moe-gathered.log
SH="--shapes 4096x2048x7168,16384x4096x8192,8192x14336x4096 --gather"
for b in new old; do X=$N; [ $b = old ] && X=$O
  CUDA_VISIBLE_DEVICES=0 timeout 120 $X bench gemm $SH --json $L/gemm-$b.jsonl > $L/gemm-$b.log 2>&1; stamp "gemm $b rc=$?"
done
bb() { local tag=$1 X=$2; shift 2; timeout 60 $X bench moe --world 2 --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
for i in 1 2; do for c in ds:4096x7168x2048x256x8 mx:8192x4096x14336x8x2; do n=${c%%:*}; cfg=${c#*:}
  bb $n-old-laid-$i $O --configs $cfg
  bb $n-old-gath-$i $O --configs $cfg --gather
  bb $n-new-gath-$i $N --configs $cfg --gather
done; done
python3 - <<'PY'
import json, glob, os
print('== gemm (ms; gather / mkernel plain)')
for f in sorted(glob.glob('/tmp/logs/gemm-*.jsonl')):
    rows={}
    for l in open(f):
        r=json.loads(l); rows.setdefault((r['shape'],r['layout']),{})[r['impl']]=r['ms']
    for k,v in rows.items(): print(os.path.basename(f)[:-6], k, ' '.join(f"{i} {m:.3f}" for i,m in v.items()), f"ratio {v.get('gather',0)/v.get('mkernel',1):.3f}")
print('== moe (ms): fused gemm-alone dispatch-alone')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    v={}
    for l in open(f):
        r=json.loads(l); v[r['impl']]=r['ms']
    print(os.path.basename(f)[4:-6].ljust(18), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone')))
PY
pack
