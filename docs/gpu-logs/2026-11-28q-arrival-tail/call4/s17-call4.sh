# Session 17, call 4 (4x H200): the four-GPU half of this session's checks. gpu_ag_gemm whole
# (MKERNEL_REQUIRE_GPUS=4: the arrival tail at 2 x 2 and 1 x 4), on the code with the "peers
# from the next" iterator (comm::peers_from_next) in gemm_rs and ag_gemm; then gpu_gemm_rs
# reduced_tiles_pulled (1 x 2 and 1 x 4) and pushed_partials on that code.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
t gpu_ag_gemm 340
t gpu_gemm_rs 110 reduced_tiles_pulled
rem=$((575 - SECONDS)); [ $rem -gt 30 ] && t gpu_gemm_rs $rem pushed_partials
pack
