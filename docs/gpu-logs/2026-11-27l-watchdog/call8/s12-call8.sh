# Session 12, call 8 (4x H200, the x4 kind lent again at the end): the landed code's 4-GPU test
# cases: gpu_moe four_gpus_one_node, then gpu_gemm_rs's 4-GPU cases one by one (logs straight
# into $OUT, so a cut-off run keeps what finished).
cd "$(dirname "$0")"; python3 -c "import tarfile; tarfile.open('bin.tar.xz').extractall('.')"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
T0=$SECONDS; st() { echo "[$((SECONDS - T0))s] $*" | tee -a $OUT/stamps.txt; }
timeout 60 bin/test-gpu_moe --exact four_gpus_one_node --test-threads=1 > $OUT/gpu_moe-four.log 2>&1; st "gpu_moe four_gpus_one_node rc=$? $(grep -h '^test result' $OUT/gpu_moe-four.log | cut -c1-50)"
for t in four_gpus_one_node pulled_and_prefetched pushed_partials f32_own_tiles_in_a_row four_gpus_as_two_and_four_nodes; do
  timeout 120 bin/test-gpu_gemm_rs --exact $t --test-threads=1 >> $OUT/gpu_gemm_rs-four.log 2>&1; st "gpu_gemm_rs $t rc=$? $(grep -h '^test result' $OUT/gpu_gemm_rs-four.log | tail -1 | cut -c1-50)"
done
