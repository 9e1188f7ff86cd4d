# Session 24, call 11 (2x H200): the engines' default rule at two ranks: two one-node GPU tests of
# gpu_gemm_rs with MKERNEL_REQUIRE_GPUS=2 (one_node_two_gpus now runs the reduce-scatter at
# 8192x4096x4096 with the engines by default), then bench gemm-rs / gemm-ar with the defaults
# (records say engines true / false) beside torch_baselines.py multi.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
for t in one_node_two_gpus reduced_tiles_pulled; do
  timeout 150 $H/bin/test-gpu_gemm_rs --exact $t --nocapture > $L/t-$t.log 2>&1; stamp "test $t rc=$?"
done
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096"
for op in gemm-rs gemm-ar; do timeout 60 $H/bin/mkernel bench $op --world 2 $S --json $L/$op.jsonl > $L/$op.log 2>&1; stamp "bench $op rc=$?"; done
timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
grep -h "engines" $L/t-one_node_two_gpus.log | grep "rank 0" | cut -c60-200 | sort | uniq -c | head
for f in $L/gemm-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep -E "op=gemm_ar|op=gemm_rs" $L/torch-multi-w2.log | sed 's/nccl_cublas/seq/' | cut -c1-200
