# Session 29, call 5 (1x H200): the health of this session's tree (the gathering producer on drawn
# walks, the 56-register gathered MoE producer, retired heap regions reused after a drain and a
# barrier) and of the twenty-eighth session's last commits (77da313..ff3bb74, never on a GPU):
# every GPU test binary, MKERNEL_REQUIRE_GPU=1; bench gemm at the seven shapes beside cuBLAS.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for t in gpu_comm gpu_moe gpu_gemm_gather gpu_selftest gpu_gemm gpu_attention gpu_ring_attention gpu_ag_gemm gpu_gemm_rs gpu_soak; do
  MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-$t --test-threads 1 --nocapture > $L/t-$t.log 2>&1; stamp "$t rc=$?"
done
timeout 80 $H/bin/mkernel bench gemm --shapes 8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192 > $L/gemm.log 2>&1; stamp "bench gemm rc=$?"
pack
grep -H "test result\|FAILED\|panicked" $L/t-*.log | sed 's#/tmp/logs/##' | head -30
grep -h "rebuilt ok" $L/t-gpu_comm.log | sort | uniq -c | head
grep -E 'mkernel|cublas' $L/gemm.log | grep -v plan | awk '{print $2,$4,$5,$6,$7,$9}'
