# Session 25, call 5 (1x H200): after the re-read (ops::copy_engines, the MoE item counts): one-GPU regression: gpu_moe whole (its
# multi-GPU functions skip) and gpu_gemm_rs whole.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
timeout 300 $H/bin/test-gpu_gemm_rs --test-threads 1 > $L/t-gpu_gemm_rs.log 2>&1; stamp "gpu_gemm_rs rc=$?"
pack
cat $L/stamps.txt
grep -h "test result\|skipped: no CUDA" $L/t-*.log | sort | uniq -c
