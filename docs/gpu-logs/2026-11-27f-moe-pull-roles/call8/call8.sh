# Call 8 (2x H200): rank-check of the new world-2 DeepSeek-like line (20 pull CTAs, runs of 6)
# with HEAD's MoE code (b36f79b's binary), fused and unfused, layout row by row.
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old
rm -f $L/*.log
timeout 100 $O launch -n 2 -- $O rank-check moe --config 4096x7168x2048x256x8 --pull-ctas 20 --run-records 6 --rounds 1 > $L/check-ds-w2.log 2>&1; stamp "rank-check ds w2 rc=$?"
tail -4 $L/check-ds-w2.log
pack
