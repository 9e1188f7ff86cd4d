# Session 11, call 1 (4x H200): GPU tests of 040b29f's device changes (gemm_rs skip_loads, allgather wait_ready).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $L/gpus.txt
timeout 200 $H/bin/test-gpu_comm --test-threads 1 > $L/test-gpu_comm.log 2>&1; stamp "gpu_comm rc=$?"
timeout 380 $H/bin/test-gpu_gemm_rs --test-threads 1 > $L/test-gpu_gemm_rs.log 2>&1; stamp "gpu_gemm_rs rc=$?"
grep -hE "^test |test result" $L/test-gpu_comm.log $L/test-gpu_gemm_rs.log | cut -c1-150
pack
