# Session 17, call 6 (4x H200): the rest of gpu_gemm_rs's one-node functions on 2c62629's code
# (comm::peers_from_next): pulled_and_prefetched, f32_own_tiles_in_a_row.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
t gpu_gemm_rs 80 pulled_and_prefetched
rem=$((150 - SECONDS)); [ $rem -gt 20 ] && t gpu_gemm_rs $rem f32_own_tiles_in_a_row
pack
