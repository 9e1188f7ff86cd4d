# Session 24, call 1 (1x H200: the only kind lent): the copy engines moving GEMM + RS / AR's
# partials and reduced blocks (--engines on), correctness with ranks sharing one GPU (gpu_gemm_rs
# copy_engines: two and four ranks on GPU 0), and the shared-GPU cases of the other one-node tests.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
cd $H/bin
for t in copy_engines two_ranks_sharing_one_gpu pushed_partials f32_own_tiles_in_a_row; do
  timeout 200 ./test-gpu_gemm_rs --exact $t --nocapture > $L/t-$t.log 2>&1; stamp "test $t rc=$?"
done
pack
cat $L/stamps.txt
tail -5 $L/t-copy_engines.log
