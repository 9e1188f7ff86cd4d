# Call 3 (x4): the other kernels on the changed engine (tile walk, epilogue): gpu_gemm_rs,
# gpu_moe, gpu_gemm_gather, gpu_soak.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local b=$1; shift; timeout 200 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
t gpu_gemm_rs
t gpu_moe
t gpu_gemm_gather
t gpu_soak
pack
