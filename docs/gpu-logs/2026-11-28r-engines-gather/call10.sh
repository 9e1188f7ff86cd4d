# Session 18, call 10 (2x H200): rank-check ag-gemm poisons the gathered A (in place: all but
# this rank's rows) before each run of back-to-back launches and each graph replay;
# gpu_ag_gemm one_node_two_gpus, copy_engines_gather, two_ranks_sharing_one_gpu on that.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 40 two_ranks_sharing_one_gpu
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 90 copy_engines_gather --exact
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 100 one_node_two_gpus
pack
grep -h 'timed out\|panicked\|differs\|instead of' $L/*.log | head -5
