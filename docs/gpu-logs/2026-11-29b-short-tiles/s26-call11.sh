# Session 26, call 11 (1x H200): what the tile-row padding costs the grouped GEMM: the world-2 /
# world-4 DeepSeek-like proxies with uniform routing (every expert about 256 / 512 rows, padded to
# 128) against balanced routing (exactly 256 / 512: no padding), both layouts, two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --layouts kn,nk --pull-ctas 16 --run-records 8 --join true"
for r in 1 2; do
  timeout 100 $H/bin/mkernel bench moe $K --json $L/uniform-$r.jsonl > $L/uniform-$r.log 2>&1; stamp "uniform $r rc=$?"
  timeout 100 $H/bin/mkernel bench moe $K --routing balanced --json $L/balanced-$r.jsonl > $L/balanced-$r.log 2>&1; stamp "balanced $r rc=$?"
done
pack
cat $L/stamps.txt
for f in $L/*.log; do echo "== $(basename $f)"; grep "mkernel-fused\|gemm-alone\|dispatch-alone" $f | awk '{print $4,$6,$7,$8,$9}'; done
