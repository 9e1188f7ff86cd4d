# Session 25, call 3 (1x H200): own runs first (MOE_OWN_FIRST), with and without the engines:
# gpu_moe copy_engines (its new cases) and the other one-GPU gpu_moe tests.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
for t in copy_engines two_ranks_sharing_one_gpu own_tokens_gathered pull_ctas_that_end_with_the_pull two_emulated_nodes_sharing_one_gpu; do
  timeout 200 $H/bin/test-gpu_moe --exact $t --nocapture > $L/t-$t.log 2>&1; stamp "test $t rc=$?"
done
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
