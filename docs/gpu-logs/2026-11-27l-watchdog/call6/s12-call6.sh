# Session 12, call 6 (2x H200): timing under the bounded waits (Gpu::time_ms, the harness):
# bench gemm (two shapes), gemm-rs and moe at world 2; gpu_selftest.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
timeout 100 $M bench gemm --shapes 8192x8192x8192,16384x4096x8192 --layouts nk --json $L/gemm.jsonl > $L/gemm.log 2>&1; stamp "bench gemm rc=$?"
timeout 100 $M bench gemm-rs --world 2 --json $L/gemm-rs-w2-n1.jsonl > $L/gemm-rs.log 2>&1; stamp "bench gemm-rs rc=$?"
timeout 100 $M bench moe --world 2 --json $L/moe-w2.jsonl > $L/moe.log 2>&1; stamp "bench moe rc=$?"
grep -hE "fused|cuBLAS|mkernel" $L/gemm.log | head -6 | cut -c1-160
MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-gpu_selftest --test-threads=4 > $L/gpu_selftest.log 2>&1; stamp "gpu_selftest rc=$? $(grep -h '^test result' $L/gpu_selftest.log | cut -c1-60)"
python3 - $L <<'PY'
import json,sys,os
for f in ('gemm.jsonl','gemm-rs-w2-n1.jsonl','moe-w2.jsonl'):
    for l in open(os.path.join(sys.argv[1],f)):
        x=json.loads(l); print(f[:-6], x['shape'], x['impl'], round(x['ms'],3), x.get('fused_over_gemm') or x.get('fused_over_ideal') or '')
PY
pack
