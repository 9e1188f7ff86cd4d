# Session 24, call 6 (1x H200): gpu_gemm_rs copy_engines with one stream and one counter per band
# (after call 5), then rank-checks of both collectives with CUDA_DEVICE_MAX_CONNECTIONS=1, two
# ranks sharing GPU 0.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
cd $H/bin
timeout 240 ./test-gpu_gemm_rs --exact copy_engines --nocapture > $L/t-copy_engines.log 2>&1; stamp "test copy_engines rc=$?"
for op in gemm-rs gemm-ar; do
  CUDA_DEVICE_MAX_CONNECTIONS=1 timeout 100 ./mkernel launch -n 2 --gpus 0,0 --timeout-s 90 -- ./mkernel rank-check $op --engines on --one-shot off --shape 8192x1024x256 --group-m 2 --lead 8 --timeout-ms 8000 > $L/conn1-$op.log 2>&1; stamp "rank-check $op CUDA_DEVICE_MAX_CONNECTIONS=1 rc=$?"
done
pack
cat $L/stamps.txt
grep -c " ok:" $L/t-copy_engines.log; tail -3 $L/t-copy_engines.log
tail -4 $L/conn1-*.log | cut -c1-250
