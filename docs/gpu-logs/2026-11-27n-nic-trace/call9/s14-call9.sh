# Session 14, call 9 (2x H200): the final code (b1b9963 = 15bd441) under the fused ops' tests that
# had not run on it: gpu_moe and gpu_gemm_rs on 2 GPUs (the engine's traps through sync::stop).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
timeout 100 $H/bin/test-gpu_moe --test-threads 1 > $L/gpu_moe.log 2>&1
stamp "gpu_moe rc=$? $(grep 'test result' $L/gpu_moe.log)"
timeout 170 $H/bin/test-gpu_gemm_rs --test-threads 1 > $L/gpu_gemm_rs.log 2>&1
stamp "gpu_gemm_rs rc=$? $(grep 'test result' $L/gpu_gemm_rs.log)"
pack
