# Session 28, call 5 (1x H200): the robustness work after 4d13510 (typed errors for ctas, timeout,
# misaligned operands, MoE tokens, role sums, flag words; group_m clamped in TileGrid and the
# reduce-scatter's bands; bounded proxy shutdown, launcher reaping, copies refused once a stream
# is stuck): every GPU test binary, MKERNEL_REQUIRE_GPU=1; bench gemm at four shapes as a guard.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for t in gpu_selftest gpu_gemm gpu_gemm_gather gpu_attention gpu_ring_attention gpu_comm gpu_ag_gemm gpu_gemm_rs gpu_moe gpu_soak; do
  MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-$t --test-threads 1 > $L/t-$t.log 2>&1; stamp "$t rc=$?"
done
timeout 60 $H/bin/mkernel bench gemm --shapes 8192x8192x8192,16384x4096x8192 > $L/gemm.log 2>&1; stamp "bench gemm rc=$?"
pack
grep -H "test result\|FAILED\|panicked" $L/t-*.log | sed 's#/tmp/logs/##' | head -30
grep -h "typed errors\|stuck_child ok\|group" $L/t-gpu_gemm.log $L/t-gpu_selftest.log | head
grep -E 'mkernel|cublas' $L/gemm.log | grep -v plan
