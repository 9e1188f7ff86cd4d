# Session 26, call 12 (1x H200): the re-read (TokenRoute::slots for the routing's ids and weights,
# ship's destinations in one match, rank-check moe taking bench moe's Knobs). gpu_moe whole.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
