# Session 25, call 4 (1x H200): the final commit's one-GPU regression: gpu_moe whole (its
# multi-GPU functions skip) and gpu_gemm_rs copy_engines (ops::Span / form_switch moved).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
timeout 200 $H/bin/test-gpu_gemm_rs --exact copy_engines --nocapture > $L/t-gemm_rs-copy_engines.log 2>&1; stamp "gpu_gemm_rs copy_engines rc=$?"
pack
cat $L/stamps.txt
grep -h "test result\|skipped: no CUDA" $L/t-*.log | sort | uniq -c
