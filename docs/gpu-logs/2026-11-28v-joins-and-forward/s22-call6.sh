# Session 22, call 6 (4x H200, call 5's staging): call 5's Mixtral-like rank-check at 2 x 2 on the
# new tuned line, stopped by that call's own 140 s launcher limit mid-way (every check it reached
# passed), again with fewer rounds and launches back to back and a longer limit.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
M=$H/bin/mkernel
timeout 380 $M launch -n 4 --nodes 2 --gpus 0,1,2,3 --timeout-s 370 -- $M rank-check moe --config 8192x4096x14336x8x2 --rounds 1 --back-to-back 5 > $L/rc-moe-mx.log 2>&1; stamp "rank-check moe 2x2 8192x4096x14336x8x2 --rounds 1 --back-to-back 5 rc=$?"
pack
cat $L/stamps.txt
grep -v '^$' $L/rc-moe-mx.log | tail -n 6
