# Session 16, call 9 (2x H200): the MoE check held to the stepped accumulation bound
# (gemm::reference_row_bounded) instead of H x 2^-23 x sum |xw|: gpu_moe one_node_two_gpus, then
# the other two-GPU cases, as time allows.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
for t in one_node_two_gpus two_emulated_nodes_of_one_gpu own_tokens_gathered; do
  timeout 100 $H/bin/test-gpu_moe --test-threads 1 $t > $L/$t.log 2>&1
  stamp "$t rc=$? $(grep 'test result' $L/$t.log)"
done
grep -ho 'worst error / bound [0-9.]*' $L/*.log | sort | uniq -c | sort -k5 -n | tail -5 | tee $L/worst.txt
pack
