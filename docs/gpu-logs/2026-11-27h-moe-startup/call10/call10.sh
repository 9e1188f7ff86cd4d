# Session 8, call 10 (4x H200): call 9's change with ship's wait for xready skipped on ranks
# without tokens (call 9 hung there: x_items = 0 means no copy and no xready). gpu_moe only.
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 230 $H/bin/test-gpu_moe --test-threads=1 > $OUT/test-gpu_moe.log 2>&1; cp $OUT/test-gpu_moe.log $L/; stamp "gpu_moe rc=$?"
grep -E "^test |test result|timed out" $L/test-gpu_moe.log | sed 's/\[rank 0\] rank-check.*//' | tail -20
pack
