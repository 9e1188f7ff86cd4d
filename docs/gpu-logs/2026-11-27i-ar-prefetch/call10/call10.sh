# Session 9, call 10 (2x H200): after the review's tidy (d2c80c2): gpu_gemm_rs pulled_and_prefetched
# and pushed_partials (the own-tile loop), one_node_two_gpus' first cases via the full test; gpu_moe
# (the ring handed over with BulkRing::hand_over).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
for t in pulled_and_prefetched pushed_partials; do
  timeout 100 $H/bin/test-gpu_gemm_rs --exact $t --test-threads 1 > $OUT/test-gpu_gemm_rs-$t.log 2>&1; stamp "gpu_gemm_rs $t rc=$?"
  grep 'test result' $OUT/test-gpu_gemm_rs-$t.log
done
timeout 120 $H/bin/test-gpu_moe --test-threads=1 > $OUT/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "test result" $OUT/test-gpu_moe.log
