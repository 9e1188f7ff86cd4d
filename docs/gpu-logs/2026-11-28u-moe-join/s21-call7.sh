# Session 21, call 7 (4x H200; mkernel-trace of this code): GEMM + ReduceScatter's timelines again,
# now with one launch of the GEMM alone traced after the timed ones (the plain GEMM stamps under
# PLAIN_EPOCH), to tell which of the fused launch's slow tiles the GEMM has too.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
T=$H/bin/mkernel-trace
for s in 16384x4096x8192 16384x8192x8192; do
  timeout 40 $T bench gemm-rs --world 4 --shapes $s --trace $L/tl-rs4-$s --trace-epochs 20,1 --json $L/tl-rs4-$s.jsonl > $L/tl-rs4-$s.log 2>&1; stamp "trace rs w4 $s rc=$?"
done
s=16384x4096x8192
( export CUDA_VISIBLE_DEVICES=0,1
  timeout 40 $T bench gemm-rs --world 2 --shapes $s --trace $L/tl-rs2-$s --trace-epochs 20,1 --json $L/tl-rs2-$s.jsonl > $L/tl-rs2-$s.log 2>&1; stamp "trace rs w2 $s rc=$?" )
gzip -9 $L/tl-*.rank*.jsonl
pack
cat $L/stamps.txt
grep -h "rank 0\]" $L/tl-rs4-16384x4096x8192.log | grep -v "^\[rank 0\] *$" | tail -30
