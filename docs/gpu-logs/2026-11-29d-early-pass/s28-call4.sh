# Session 28, call 4 (1x H200): health sweep of HEAD (a290810): every GPU test binary on one H200
# (MKERNEL_REQUIRE_GPU=1; tests needing 2+ GPUs skip), then the plain GEMM beside cuBLAS at the
# issue's seven shapes, both layouts; the soak last if time is left.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv > $L/gpu.txt 2>&1
for t in gpu_selftest gpu_gemm gpu_gemm_gather gpu_attention gpu_ring_attention gpu_comm gpu_ag_gemm gpu_gemm_rs gpu_moe; do
  MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-$t --test-threads 1 > $L/t-$t.log 2>&1; stamp "$t rc=$?"
done
timeout 90 $H/bin/mkernel bench gemm --shapes 8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192 --json $L/gemm.jsonl > $L/gemm.log 2>&1; stamp "bench gemm rc=$?"
left=$((560 - SECONDS + T0))
[ $left -gt 60 ] && { MKERNEL_REQUIRE_GPU=1 timeout $left $H/bin/test-gpu_soak --test-threads 1 > $L/t-gpu_soak.log 2>&1; stamp "gpu_soak rc=$? (limit $left s)"; }
pack
grep -H "test result\|FAILED\|panicked" $L/t-*.log | sed 's#/tmp/logs/##' | head -30
grep -v '^\s*$' $L/gemm.log | tail -20
