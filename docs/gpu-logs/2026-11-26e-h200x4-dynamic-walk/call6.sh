# Call 6 (x4): the reduce-scatter with its partials pushed by the sources (as the all-reduce's)
# instead of pulled by the owners. Tests: gpu_gemm_rs reduce_scatter_pushed (1 x 2, 1 x 4) and
# four_gpus_one_node (the pulled default). Bench: gemm-rs pull / push (lead 66) / push (every
# send first), interleaved twice at 1 x 4, once each at 1 x 2; torch multi at world 4 and 2.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"; W2="CUDA_VISIBLE_DEVICES=0,1"
t() { local b=$1; shift; timeout 200 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b $* rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
rs() { local tag=$1; shift; timeout 60 $M bench gemm-rs "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; grep -E "16384x|32768x|8192x8192" $L/$tag.log | grep mkernel-fused | awk '{print $3, $(NF-3)}' | tr '\n' ' '; echo; }
for r in 1 2; do
  rs rs-w4-pull-$r --world 4
  rs rs-w4-push-$r --world 4 --push on
  rs rs-w4-pushall-$r --world 4 --push on --lead all
done
rs rs-w2-pull --world 2
rs rs-w2-push --world 2 --push on
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
env $W2 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
t gpu_gemm_rs reduce_scatter_pushed
cp $L/test-gpu_gemm_rs.log $L/test-gpu_gemm_rs-pushed.log
t gpu_gemm_rs four_gpus_one_node
pack
