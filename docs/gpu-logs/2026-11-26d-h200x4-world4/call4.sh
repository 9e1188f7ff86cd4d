# Call 4 (x4): GEMM + RS / AR after the turned round slots, pulls from the next source on, the
# reduce-scatter's one-round lead over more than two ranks and the inter-reduce's arrival order:
# gpu_gemm_rs (1 x 2, 2 x 1, 1 x 4, 2 x 2, 4 x 1), benches at world 4 and 2 x 1, tune gemm-rs|ar
# at world 4, torch multi at world 4.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
timeout 240 $H/bin/test-gpu_gemm_rs --test-threads=1 --nocapture > $L/test-gemm_rs.log 2>&1; stamp "test gemm_rs rc=$? $(grep -E '^test result' $L/test-gemm_rs.log | tail -1)"
for op in gemm-rs gemm-ar; do for n in 1 2; do
  timeout 60 $M bench $op --world 4 --nodes $n --json $L/$op-w4-n$n.jsonl > $L/$op-w4-n$n.log 2>&1; stamp "$op w4 n$n rc=$?"
  grep -E "modelled" $L/$op-w4-n$n.log | cut -c1-120
done; done
timeout 60 $M bench gemm-ar --world 2 --nodes 2 --json $L/gemm-ar-w2-n2.jsonl > $L/gemm-ar-w2-n2.log 2>&1; stamp "gemm-ar w2 n2 rc=$?"
grep -E "modelled" $L/gemm-ar-w2-n2.log | cut -c1-120
env $W4 PYTHONUNBUFFERED=1 timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi rc=$?"
S5="16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096"
timeout 120 $M tune gemm-rs --world 4 --nodes 1 --shapes $S5 --out $L/tune-rs-w4-n1.jsonl > $L/tune-rs-w4-n1.log 2>&1; stamp "tune rs n1 rc=$?"
timeout 120 $M tune gemm-ar --world 4 --nodes 1 --shapes $S5 --out $L/tune-ar-w4-n1.jsonl > $L/tune-ar-w4-n1.log 2>&1; stamp "tune ar n1 rc=$?"
timeout 120 $M tune gemm-rs --world 4 --nodes 2 --shapes $S5 --inter-reduce 16,32 --groups 8,32 --out $L/tune-rs-w4-n2.jsonl > $L/tune-rs-w4-n2.log 2>&1; stamp "tune rs n2 rc=$?"
timeout 120 $M tune gemm-ar --world 4 --nodes 2 --shapes $S5 --inter-reduce 32,64,96 --groups 8,32 --out $L/tune-ar-w4-n2.jsonl > $L/tune-ar-w4-n2.log 2>&1; stamp "tune ar n2 rc=$?"
cat $L/tune-*.jsonl | cut -c1-260
pack
