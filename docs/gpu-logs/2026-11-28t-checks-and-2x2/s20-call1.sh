# Session 20, call 1 (4x H200): 3b37cb3 / bdf1d3f / 6e7f3cc's first GPU run. Two world-2 lanes in
# parallel (GPUs 0,1 and 2,3: ports are drawn free, nothing shared), then four-GPU functions.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
left() { echo $(( 575 - (SECONDS - T0) )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}$SFX.log 2>&1; stamp "$name ${1:-all}$SFX rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}$SFX.log)"; }
nvidia-smi topo -m > $L/topo.txt 2>&1
( export CUDA_VISIBLE_DEVICES=0,1 MKERNEL_REQUIRE_GPUS=2 SFX=-a; t gpu_gemm_rs 330; t gpu_comm 100 ) &
( export CUDA_VISIBLE_DEVICES=2,3 MKERNEL_REQUIRE_GPUS=2 SFX=-b; t gpu_moe 150; t gpu_ag_gemm 300 ) &
wait
export MKERNEL_REQUIRE_GPUS=4 SFX=-4
t gpu_moe 100 four_gpus_one_node
t gpu_gemm_rs 100 four_gpus_one_node
t gpu_moe 100 two_emulated_nodes_of_two_gpus
t gpu_gemm_rs 120 four_gpus_as_two_and_four_nodes
pack
cat $L/stamps.txt
grep -h 'timed out\|panicked\|differs\|instead of' $L/*.log | head -8
