# Session 21, call 1 (4x H200; staged with /tmp/stage.sh gpu_comm gpu_ring_attention gpu_moe
# gpu_ag_gemm gpu_gemm_rs): the twentieth session's host changes on GPUs. Every two-path op's
# back-to-back check now runs through cmd_rank::History (cb2f576), so every world-2 suite runs
# whole, two lanes side by side, then gpu_comm's four-GPU all-gather function (the all-gather's
# back-to-back check across nodes without a barrier).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-565}   # below the run's timeout_s (590)
left() { echo $(( LIMIT - SECONDS )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}$SFX.log 2>&1; stamp "$name ${1:-all}$SFX rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}$SFX.log)"; }
( export CUDA_VISIBLE_DEVICES=0,1 MKERNEL_REQUIRE_GPUS=2 SFX=-a; t gpu_gemm_rs 340; t gpu_comm 120 ) &
( export CUDA_VISIBLE_DEVICES=2,3 MKERNEL_REQUIRE_GPUS=2 SFX=-b; t gpu_moe 120; t gpu_ring_attention 80; t gpu_ag_gemm 240 ) &
wait
export MKERNEL_REQUIRE_GPUS=4 SFX=-4
t gpu_comm 150 allgather_four_gpus_one_node_and_two_nodes
pack
cat $L/stamps.txt
