# Session 26, call 5 (1x H200): the router's weights loaded together (write_records). gpu_moe; the
# router's phases again (mkernel-trace-phases of this code); the fused MoE at world 1 against HEAD's
# module (head.cubin), interleaved.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
T=$H/bin/mkernel-trace-phases
C=4096x7168x2048x128x8
for p in 8 16; do
  timeout 60 $T bench moe --world 1 --configs $C --layouts kn --pull-ctas $p --run-records 8 --join true --trace $L/tl-ph$p --reps 10 > $L/tl-ph$p.log 2>&1; stamp "trace phases p$p rc=$?"
done
K="--world 1 --configs $C,4096x7168x2048x64x8 --layouts kn,nk --pull-ctas 16 --run-records 8 --join true"
for r in 1 2; do
  timeout 100 $H/bin/mkernel bench moe $K > $L/moe-new-$r.log 2>&1; stamp "moe new $r rc=$?"
  MKERNEL_MODULE=$H/bin/head.cubin timeout 100 $H/bin/mkernel bench moe $K > $L/moe-old-$r.log 2>&1; stamp "moe old $r rc=$?"
done
gzip -9 $L/tl-*.rank*.jsonl
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
for f in $L/moe-*.log; do echo "== $(basename $f)"; grep "mkernel-fused\|gemm-alone" $f | awk '{print $3,$5,$6,$7}'; done
