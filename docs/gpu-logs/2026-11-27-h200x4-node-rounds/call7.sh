# Call 7 (x4), binaries of call 6 (the session's final code): regression of what the static walk's
# TileIter change touches: the plain GEMM beside cuBLAS on the 7 shapes, gpu_gemm, gpu_moe,
# gpu_ring_attention, gpu_gemm_rs at 1 x 4, 2 x 2 and 4 x 1.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 250 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
CUDA_VISIBLE_DEVICES=0 timeout 120 $M bench gemm --shapes 8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192 --json $L/gemm.jsonl > $L/gemm.log 2>&1; stamp "bench gemm rc=$?"
t gpu_gemm
t gpu_ring_attention
t gpu_gemm_rs four_gpus
t gpu_moe
grep -E "x cuBLAS|vs cuBLAS|ratio" $L/gemm.log | grep -v 'rank [123]' | head -20
pack
