# Call 8 (x4): the final binaries' defaults (the reduce-scatter pushes above two ranks): gemm-rs
# and gemm-ar at 1 x 4 beside torch multi; gpu_gemm_rs four_gpus_one_node and
# reduce_scatter_pushed.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local b=$1; shift; timeout 200 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b-$1.log 2>&1; stamp "test $b $* rc=$? $(grep -E '^test result' $L/test-$b-$1.log | tail -1)"; }
b() { local tag=$1; shift; timeout 60 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
b gemm-rs-w4-n1 gemm-rs --world 4
b gemm-ar-w4-n1 gemm-ar --world 4
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
t gpu_gemm_rs four_gpus_one_node
t gpu_gemm_rs reduce_scatter_pushed
grep -h "push" $L/gemm-rs-w4-n1.jsonl | head -1 | grep -o '"push":[a-z]*'
pack
