# Session 18, call 7 (2x H200): own flags raised after the edge copies (the tiles that read this
# rank's rows from the gathered A wait for them): gpu_ag_gemm copy_engines_gather,
# two_ranks_sharing_one_gpu and one_node_two_gpus (the push-CTA path unchanged).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 120 copy_engines_gather --exact
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 60 two_ranks_sharing_one_gpu
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 120 one_node_two_gpus
pack
grep -h 'timed out\|panicked' $L/*.log | head -5
