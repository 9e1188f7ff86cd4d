# Call 2 (x4, binaries of 7b0255c + the ring agreement fix): ring's 4-rank test; the all-gather's
# CTA sweep at world 4 beside the copy engine; tune ag-gemm at 1 x 4 and 2 x 2; GEMM + RS / AR,
# MoE and ring attention at world 4 beside torch_baselines.py (multi, moe, ring).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
timeout 120 $H/bin/test-gpu_ring_attention --test-threads=1 --nocapture four_ranks > $L/test-ring.log 2>&1; stamp "test ring rc=$? $(grep -E '^test result' $L/test-ring.log | tail -1)"
for c in 16 24 32 48; do for ip in "" --in-place; do
  timeout 60 $M launch -n 4 --nodes 1 --timeout-s 50 -- $M bench allgather --intra-ctas $c --copy bulk $ip --json $L/agx-c$c$ip.jsonl > $L/agx-c$c$ip.log 2>&1; stamp "allgather c$c $ip rc=$?"
  grep -E "268435456|copy-engine" $L/agx-c$c$ip.log | tail -3 | cut -c1-140
done; done
timeout 100 $M launch -n 4 --nodes 1 --timeout-s 90 -- $M bench allgather --intra-ctas 32 --copy lsu --json $L/agx-c32-lsu.jsonl > $L/agx-c32-lsu.log 2>&1; stamp "allgather lsu rc=$?"
S4="16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
timeout 150 $M tune ag-gemm --world 4 --nodes 1 --shapes $S4 --push-ctas 3,4,5,6,8 --chunk-rows 128,256 --out $L/tune-ag-w4-n1.jsonl > $L/tune-ag-w4-n1.log 2>&1; stamp "tune ag n1 rc=$?"
timeout 200 $M tune ag-gemm --world 4 --nodes 2 --shapes $S4 --push-ctas 3,4,6,8,10 --chunk-rows 32,64,128 --out $L/tune-ag-w4-n2.jsonl > $L/tune-ag-w4-n2.log 2>&1; stamp "tune ag n2 rc=$?"
cat $L/tune-ag-w4-n*.jsonl | cut -c1-200
for op in gemm-rs gemm-ar; do for n in 1 2; do
  timeout 100 $M bench $op --world 4 --nodes $n --json $L/$op-w4-n$n.jsonl > $L/$op-w4-n$n.log 2>&1; stamp "$op n$n rc=$?"
  grep -E "overlap" $L/$op-w4-n$n.log | cut -c1-160
done; done
env $W4 PYTHONUNBUFFERED=1 timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi rc=$?"
for n in 1 2; do
  timeout 100 $M bench moe --world 4 --nodes $n --json $L/moe-w4-n$n.jsonl > $L/moe-w4-n$n.log 2>&1; stamp "moe n$n rc=$?"
  grep -vE "^\[rank [123]\]|^\{" $L/moe-w4-n$n.log | tail -8 | cut -c1-170
done
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe rc=$?"
grep -vE "^\s*$" $L/torch-moe-w4.log | tail -4 | cut -c1-200
for n in 1 2; do
  timeout 100 $M bench ring-attention --world 4 --nodes $n --json $L/ring-w4-n$n.jsonl > $L/ring-w4-n$n.log 2>&1; stamp "ring n$n rc=$?"
  grep -vE "^\[rank [123]\]|^\{" $L/ring-w4-n$n.log | tail -6 | cut -c1-170
done
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring rc=$?"
grep -vE "^\s*$" $L/torch-ring-w4.log | tail -6 | cut -c1-200
pack
