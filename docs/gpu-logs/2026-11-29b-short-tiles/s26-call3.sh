# Session 26, call 3 (1x H200): where the fused MoE's time goes with no NVLink at all (world 1, the
# world-2 DeepSeek-like per-rank problem E=128 k=8, and world-4's E=64): a sweep of pull CTAs x runs
# x join, then launch timelines of the trace build (the table's point: 8 pull CTAs, no join; and
# 16 joining).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
T=$H/bin/mkernel-trace; P=$H/bin/mkernel
C=4096x7168x2048x128x8
timeout 240 $P tune moe --world 1 --configs $C,4096x7168x2048x64x8 --pull-ctas 8,16,24 --run-records 5,8,32 --join true,false --rounds 1 --out $L/tune-w1.jsonl > $L/tune-w1.log 2>&1; stamp "tune rc=$?"
timeout 60 $T bench moe --world 1 --configs $C --layouts kn --trace $L/tl-p8 --json $L/tl-p8.jsonl > $L/tl-p8.log 2>&1; stamp "trace p8 rc=$?"
timeout 60 $T bench moe --world 1 --configs $C --layouts kn --pull-ctas 16 --run-records 8 --join true --trace $L/tl-p16j --json $L/tl-p16j.jsonl > $L/tl-p16j.log 2>&1; stamp "trace p16j rc=$?"
timeout 60 $P bench moe --world 1 --configs $C --layouts kn --pull-ctas 16 --run-records 8 --join true > $L/plain-p16j.log 2>&1; stamp "plain p16j rc=$?"
gzip -9 $L/tl-*.rank*.jsonl
pack
cat $L/stamps.txt
grep "tune moe" $L/tune-w1.log | sort -t: -k2 | head -80
for f in $L/tl-p8.log $L/tl-p16j.log $L/plain-p16j.log; do echo "== $(basename $f)"; grep -v "^\[rank 0\] *$" $f | tail -40; done
