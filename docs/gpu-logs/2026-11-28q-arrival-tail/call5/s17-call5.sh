# Session 17, call 5 (4x H200): what call 4's own timeout left out, on the same binaries
# (comm::peers_from_next): gpu_ag_gemm two_emulated_nodes_one_gpu_each, then gpu_gemm_rs
# one_node_two_gpus and four_gpus_one_node.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
t gpu_ag_gemm 80 two_emulated
t gpu_gemm_rs 110 one_node_two_gpus
rem=$((270 - SECONDS)); [ $rem -gt 30 ] && t gpu_gemm_rs $rem four_gpus_one_node
pack
