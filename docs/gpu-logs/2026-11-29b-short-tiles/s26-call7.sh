# Session 26, call 7 (1x H200): after the review (peers in a different order per CTA, a shared-memory proxy fence, SHIPPED stamped only when shipped); every router CTA ships a share of the records (was router CTA 0
# alone). gpu_moe whole (two and four ranks sharing GPU 0, two emulated nodes: the NVLink and
# FIFO paths of the ship), then the fused MoE at world 1 against HEAD's module (no peers: only
# the barrier changed there), interleaved.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --configs 4096x7168x2048x128x8,8192x4096x14336x4x2 --layouts kn --pull-ctas 16 --run-records 8 --join true"
for r in 1 2; do
  timeout 100 $H/bin/mkernel bench moe $K > $L/moe-new-$r.log 2>&1; stamp "moe new $r rc=$?"
  MKERNEL_MODULE=$H/bin/head.cubin timeout 100 $H/bin/mkernel bench moe $K > $L/moe-old-$r.log 2>&1; stamp "moe old $r rc=$?"
done
pack
cat $L/stamps.txt
grep -h "test result\|panicked\|FAILED" $L/t-*.log | head
for f in $L/moe-*.log; do echo "== $(basename $f)"; grep "mkernel-fused\|gemm-alone" $f | awk '{print $3,$4,$6,$7,$8}'; done
