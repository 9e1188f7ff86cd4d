# Session 25, call 1 (1x H200): the MoE's copy engines (MoeOptions::engines) on one GPU: the
# shared-GPU cases of gpu_moe copy_engines, then the other one-GPU gpu_moe tests (flag words grew).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
for t in copy_engines two_ranks_sharing_one_gpu own_tokens_gathered pull_ctas_that_end_with_the_pull two_emulated_nodes_sharing_one_gpu; do
  timeout 200 $H/bin/test-gpu_moe --exact $t --nocapture > $L/t-$t.log 2>&1; stamp "test $t rc=$?"
done
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
grep -h -i "error\|panick\|timed out" $L/t-*.log | head -20
