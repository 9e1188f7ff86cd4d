# Call 5 (x4, the session's final binaries): the 4-GPU tests of every fused op, then every fused
# op at world 4 (1 x 4, 2 x 2) beside torch_baselines.py multi / moe / ring at world 4, the
# all-gather beside the copy engine, and GEMM + RS / AR at world 2 beside torch multi at world 2.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"; W2="CUDA_VISIBLE_DEVICES=0,1"
t() { local b=$1; shift; timeout 170 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
t gpu_gemm_rs four_gpus
t gpu_ag_gemm four_gpus
t gpu_moe two_emulated_nodes_of_two_gpus four_gpus_one_node
t gpu_ring_attention four_ranks
b() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for n in 1 2; do
  b ag-w4-n$n ag-gemm --world 4 --nodes $n
  b gemm-rs-w4-n$n gemm-rs --world 4 --nodes $n
  b gemm-ar-w4-n$n gemm-ar --world 4 --nodes $n
done
env $W4 PYTHONUNBUFFERED=1 timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
for c in 16 48; do for ip in "" --in-place; do
  timeout 60 $M launch -n 4 --nodes 1 --timeout-s 50 -- $M bench allgather --intra-ctas $c --copy bulk $ip --json $L/allgather-c$c$ip.jsonl > $L/allgather-c$c$ip.log 2>&1; stamp "allgather c$c $ip rc=$?"
done; done
for n in 1 2; do b moe-w4-n$n moe --world 4 --nodes $n; done
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe w4 rc=$?"
for n in 1 2; do b ring-w4-n$n ring-attention --world 4 --nodes $n; done
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring w4 rc=$?"
for n in 1 2; do
  b gemm-rs-w2-n$n gemm-rs --world 2 --nodes $n
  b gemm-ar-w2-n$n gemm-ar --world 2 --nodes $n
done
env $W2 PYTHONUNBUFFERED=1 timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
grep -hE "overlap eff|modelled|time /|^\[rank 0\]   " $L/*.log | cut -c1-150
pack
