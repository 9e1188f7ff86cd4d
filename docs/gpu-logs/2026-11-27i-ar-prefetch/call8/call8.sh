# Session 9, call 8 (4x H200): gpu_gemm_rs's several-node cases at 4 GPUs (2 x 2 and 4 x 1;
# the host's push rule changed this session: the all-reduce's collectors across nodes must
# still receive pushes) and the 1 x 4 cases, on the final code.
source "$(dirname "$0")/prep.sh"
for t in four_gpus_as_two_and_four_nodes; do
  MKERNEL_REQUIRE_GPU=1 timeout 250 $H/bin/test-gpu_gemm_rs --exact $t --test-threads 1 > $OUT/test-gpu_gemm_rs-$t.log 2>&1; stamp "gpu_gemm_rs $t rc=$?"
  grep 'test result' $OUT/test-gpu_gemm_rs-$t.log
done
