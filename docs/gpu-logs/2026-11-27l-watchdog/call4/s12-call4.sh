# Session 12, call 4 (one H200): gpu_selftest at HEAD (the child-process launcher shared by the
# trap and stuck tests), verdict lines printed.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
timeout 150 $H/bin/test-gpu_selftest --test-threads=1 --nocapture > $L/gpu_selftest.log 2>&1; stamp "gpu_selftest rc=$?"
grep -E "^test result|_child ok" $L/gpu_selftest.log | cut -c1-400
pack
