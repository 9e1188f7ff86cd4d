# Session 20, call 4 (4x H200): a diagnostic build (trace.diff, trace.rs: stamps in a global
# buffer, printed after the launch) of AllGather + GEMM at 2 x 2, launches with epochs 41 and 42
# (one fused, one communication alone): when each CTA starts and ends, when each tile is claimed
# and when its rows were in, when the forward CTAs saw each chunk arrive, when the inter-send
# CTA had pushed its WRITEs and when they were read.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
T=$H/bin/mkernel-trace
for s in 16384x4096x8192 16384x8192x8192; do
  timeout 90 $T bench ag-gemm --world 4 --nodes 2 --shapes $s --reps 40 --json $L/tr-$s.jsonl > $L/tr-$s.log 2>&1; stamp "trace $s rc=$?"
done
grep -c MKT $L/tr-*.log
pack
cat $L/stamps.txt
