# Call 1 (x4, binaries of 7b0255c): the 4-GPU tests of every fused op, then AllGather + GEMM at
# world 4 (1 x 4 and 2 x 2) beside torch_baselines.py multi at world 4.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local b=$1; shift; timeout 170 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
t gpu_ag_gemm four_gpus
t gpu_comm allgather_four
t gpu_gemm_rs four_gpus
t gpu_moe two_emulated_nodes_of_two_gpus four_gpus_one_node
t gpu_ring_attention four_ranks
for n in 1 2; do
  timeout 100 $H/bin/mkernel bench ag-gemm --world 4 --nodes $n --json $L/ag-w4-n$n.jsonl > $L/ag-w4-n$n.log 2>&1; stamp "ag w4 n$n rc=$?"
  grep -E "overlap eff" $L/ag-w4-n$n.log | cut -c1-150
done
CUDA_VISIBLE_DEVICES=0,1,2,3 PYTHONUNBUFFERED=1 timeout 170 python3 $H/torch_baselines.py multi --json $L/torch-w4.jsonl > $L/torch-w4.log 2>&1; stamp "torch rc=$?"
grep -E "ms" $L/torch-w4.log | tail -20
pack
