# Session 19, call 2 (2x H200): a kernel that pushed WRITEs through the FIFO now ends only after
# the proxy released them (their sources read): AllGather + GEMM, the all-gather, the MoE and ring
# attention across emulated nodes, under the rank-checks' alternating inputs; the FIFO self-test.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
left() { echo $(( 570 - (SECONDS - T0) )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 40 two_ranks_sharing_one_gpu
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 60 two_emulated_nodes_one_gpu_each
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 100 copy_engines_gather --exact
MKERNEL_REQUIRE_GPUS=2 t gpu_selftest 60
MKERNEL_REQUIRE_GPUS=2 t gpu_ring_attention 60
MKERNEL_REQUIRE_GPUS=2 t gpu_moe 150
MKERNEL_REQUIRE_GPUS=2 t gpu_gemm_rs 60 two_emulated_nodes_two_gpus
MKERNEL_REQUIRE_GPUS=2 t gpu_gemm_rs 60 two_nodes_of_two_ranks_sharing_one_gpu
$H/bin/mkernel bench ag-gemm --world 2 --nodes 2 --shapes 16384x4096x8192,8192x8192x8192 --json $L/bench-ag-2x1.json > $L/bench-ag-2x1.txt 2>&1; stamp "bench ag-gemm 2x1 rc=$?"
MKERNEL_REQUIRE_GPUS=2 t gpu_comm 200
pack
cat $L/stamps.txt
tail -12 $L/bench-ag-2x1.txt
grep -h 'timed out\|panicked\|differs\|instead of' $L/*.log | head -8
