# Session 19, call 4 (4x H200): the four-GPU test functions under the alternating checks and the
# FIFO's released position (1 x 4 and 2 emulated nodes x 2), the copy engines' four-GPU case on
# the final engines code.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
left() { echo $(( 570 - (SECONDS - T0) )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
nvidia-smi topo -m > $L/topo.txt 2>&1
t gpu_ag_gemm 120 copy_engines_gather_four_gpus
t gpu_moe 120 four_gpus_one_node
t gpu_moe 120 two_emulated_nodes_of_two_gpus
t gpu_gemm_rs 150 four_gpus_as_two_and_four_nodes
t gpu_ag_gemm 150 four_gpus_one_node_and_two_nodes
t gpu_gemm_rs 120 four_gpus_one_node
t gpu_comm 120 allgather_four_gpus_one_node_and_two_nodes
pack
cat $L/stamps.txt
grep -h 'timed out\|panicked\|differs\|instead of' $L/*.log | head -8
