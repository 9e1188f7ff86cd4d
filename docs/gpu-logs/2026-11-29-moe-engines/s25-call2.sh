# Session 25, call 2 (1x H200): the MoE's copy engines after the review (the stream waits on its
# own launch's engine_go, no cross-rank stream wait): gpu_moe copy_engines and the other one-GPU
# gpu_moe tests; the typed error for ranks sharing a GPU whose fused launch holds every SM.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
for t in copy_engines two_ranks_sharing_one_gpu own_tokens_gathered pull_ctas_that_end_with_the_pull two_emulated_nodes_sharing_one_gpu; do
  timeout 200 $H/bin/test-gpu_moe --exact $t --nocapture > $L/t-$t.log 2>&1; stamp "test $t rc=$?"
done
timeout 60 $H/bin/mkernel launch -n 2 --gpus 0,0 --timeout-s 50 -- $H/bin/mkernel rank-check moe --engines on --config 4096x7168x2048x256x8 --rounds 1 > $L/shared-big.log 2>&1; stamp "shared big rc=$? (expected: a typed error)"
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
grep -h -i "engines\`\|invalid" $L/shared-big.log | head -3 | cut -c1-300
