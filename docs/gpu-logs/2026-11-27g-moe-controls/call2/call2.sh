# Session 7, call 2 (2x H200): does copy-engine NVLink traffic slow a GEMM? cuBLAS GEMM of the
# world-2 all-reduce's per-rank product, alone and beside 128 MiB of peer copies per GEMM, both
# GPUs at once; then our fused GEMM + AllReduce at the same shape for reference (HEAD binary).
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
for s in 16384x4096x4096 8192x8192x4096; do
  timeout 120 python3 $H/ce_probe.py $s > $L/ce-probe-$s.log 2>&1; stamp "ce probe $s rc=$?"; cat $L/ce-probe-$s.log
done
timeout 90 $O bench gemm-ar --world 2 --shapes 16384x4096x8192,8192x8192x8192 --json $L/ar.jsonl > $L/ar.log 2>&1; stamp "bench gemm-ar rc=$?"
grep -v "^\[" $L/ar.log | tail -8
pack
