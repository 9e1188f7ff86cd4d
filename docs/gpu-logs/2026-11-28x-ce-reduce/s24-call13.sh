# Session 24, call 13 (2x H200): the one-node GPU tests of gpu_gemm_rs at 1 x 2 on the final
# default rule (the engines on at two ranks for large partials unless another form is asked for),
# MKERNEL_REQUIRE_GPUS=2.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
for t in one_node_two_gpus pushed_partials pulled_and_prefetched f32_own_tiles_in_a_row copy_engines; do
  timeout 150 $H/bin/test-gpu_gemm_rs --exact $t --nocapture > $L/t-$t.log 2>&1; stamp "test $t rc=$?"
done
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
