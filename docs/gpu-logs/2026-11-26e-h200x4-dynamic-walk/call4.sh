# Call 4 (x4): regression checks of this session's engine changes and the ring's later landed
# wait: ring attention at 1 x 4, 2 x 2 and 4 x 1 (every hop through the proxy) beside torch ring;
# MoE at 1 x 4 beside torch moe; GEMM + RS / AR at 1 x 4 beside torch multi; tune ag-gemm at
# 1 x 4 and 2 x 2 with the push CTAs joining the GEMM.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
b() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for n in 1 2 4; do b ring-w4-n$n ring-attention --world 4 --nodes $n; grep -E "of one block|time /" $L/ring-w4-n$n.log | cut -c1-140; done
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring w4 rc=$?"
b moe-w4-n1 moe --world 4 --nodes 1
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe w4 rc=$?"
b gemm-rs-w4-n1 gemm-rs --world 4 --nodes 1
b gemm-ar-w4-n1 gemm-ar --world 4 --nodes 1
b ag-w4-n1 ag-gemm --world 4 --nodes 1
b ag-w4-n2 ag-gemm --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
for n in 1 2; do
  timeout 150 $M tune ag-gemm --world 4 --nodes $n --shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192 --push-ctas 4,8,12,16 --chunk-rows 64,128,256 --out $L/tune-ag-w4-n$n.jsonl > $L/tune-ag-w4-n$n.log 2>&1; stamp "tune ag w4 n$n rc=$?"
done
grep -hE "overlap eff|modelled|time /" $L/*.log | cut -c1-150
pack
