# Session 16, call 5 (4x H200): larger copy-engine chunks at 1 x 4 (a default lead is now raised
# to the chunk), then the attention kernels' waits ending in sync::stop: gpu_attention and
# gpu_ring_attention, and the attention / ring benches against call 3's binary (mkernel-one,
# bare traps).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
bb() { local tag=$1 bin=$2; shift 2; timeout 60 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
bb sm-a-gemm-rs-w4 mkernel gemm-rs --world 4 $S
for c in 64 128 256; do bb ce$c-a-gemm-rs-w4 mkernel gemm-rs --world 4 $S --engine-chunk $c; done
python3 $H/ab.py $L | tee $L/ab.txt
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
timeout 150 $H/bin/test-gpu_attention --test-threads 1 > $L/gpu_attention.log 2>&1
stamp "gpu_attention rc=$? $(grep 'test result' $L/gpu_attention.log)"
timeout 200 $H/bin/test-gpu_ring_attention --test-threads 1 > $L/gpu_ring_attention.log 2>&1
stamp "gpu_ring_attention rc=$? $(grep 'test result' $L/gpu_ring_attention.log)"
for rep in a b; do
  bb stop-$rep-attn mkernel attention
  bb trap-$rep-attn mkernel-one attention
  CUDA_VISIBLE_DEVICES=0,1 bb stop-$rep-ring mkernel ring-attention --world 2
  CUDA_VISIBLE_DEVICES=0,1 bb trap-$rep-ring mkernel-one ring-attention --world 2
done
pack
