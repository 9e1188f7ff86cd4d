# Session 26, call 10 (1x H200, 0be0180): the gathering producer (own tokens read where they are,
# `--gather`) against the laid-out rows at world 1 on the world-2 / world-4 DeepSeek-like
# proxies, both weight layouts, interleaved twice (laid out with and without the join).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --layouts kn,nk --pull-ctas 16 --run-records 8"
for r in 1 2; do
  timeout 100 $H/bin/mkernel bench moe $K --join true > $L/laid-join-$r.log 2>&1; stamp "laid join $r rc=$?"
  timeout 100 $H/bin/mkernel bench moe $K --join false > $L/laid-nojoin-$r.log 2>&1; stamp "laid nojoin $r rc=$?"
  timeout 100 $H/bin/mkernel bench moe $K --gather > $L/gather-$r.log 2>&1; stamp "gather $r rc=$?"
done
pack
cat $L/stamps.txt
for f in $L/*.log; do echo "== $(basename $f)"; grep "mkernel-fused\|gemm-alone\|dispatch-alone" $f | awk '{print $4,$6,$7,$8}'; done
