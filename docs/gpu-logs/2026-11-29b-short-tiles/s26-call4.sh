# Session 26, call 4 (1x H200): the router's phases (a diagnostic trace build, mkernel-trace-phases:
# route() stamps ROUTED with a = 101..107 after each of its block barriers), world 1, E=128 k=8,
# 8 / 16 / 32 / 48 pull CTAs.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
T=$H/bin/mkernel-trace-phases
C=4096x7168x2048x128x8
for p in 8 16 32 48; do
  timeout 60 $T bench moe --world 1 --configs $C --layouts kn --pull-ctas $p --run-records 8 --join true --trace $L/tl-ph$p --reps 10 > $L/tl-ph$p.log 2>&1; stamp "trace phases p$p rc=$?"
done
gzip -9 $L/tl-*.rank*.jsonl
pack
cat $L/stamps.txt
for p in 8 16 32 48; do grep "mkernel-fused\|gemm-alone\|dispatch-alone" $L/tl-ph$p.log; done
