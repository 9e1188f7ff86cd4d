# Session 9, call 7 (2x H200): the refactored gpu_gemm_rs tests (pushed_partials,
# pulled_and_prefetched) on the final commit; the MoE at world 2 with the final code beside
# torch_baselines.py moe (two runs).
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log $L/*.jsonl
for t in pushed_partials pulled_and_prefetched; do
  MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-gpu_gemm_rs --exact $t --test-threads 1 > $OUT/test-gpu_gemm_rs-$t.log 2>&1; stamp "gpu_gemm_rs $t rc=$?"
  grep 'test result' $OUT/test-gpu_gemm_rs-$t.log
done
for i in 1 2; do timeout 60 $H/bin/mkernel bench moe --world 2 --json $L/moe-w2-$i.jsonl > $L/moe-w2-$i.log 2>&1; stamp "moe w2 $i rc=$?"; done
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe w2 rc=$?"
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r.get('shape','?'),{})[r['impl']]=r
    for c,v in R.items():
        ms={k: v[k]['ms'] for k in v}
        tf={k: v[k].get('tflops') for k in v}
        print(os.path.basename(f)[:-6].ljust(10), str(c).ljust(26), ' '.join(f"{k}={ms[k]:.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone','mkernel-unfused') if k in ms), f"ov={ms['mkernel-fused']/max(ms['gemm-alone'],ms.get('dispatch-alone',0)):.3f}", f"gemm-tflops={tf.get('gemm-alone')}")
for l in open('/tmp/logs/torch-moe-w2.jsonl'):
    r=json.loads(l); print('torch', {k: r[k] for k in r if k in ('config','impl','ms','tflops','T','H','I','E','k','shape')})
PY
pack
