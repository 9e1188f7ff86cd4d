# Session 26, call 8 (1x H200): cb6cfe0 (the session's last code: MoeParams::record_share, the
# timeline's first-tiles line). gpu_moe whole; a world-1 timeline of the trace build.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 16 --run-records 8 --join true --trace $L/tl-p16j > $L/tl-p16j.log 2>&1; stamp "trace p16j rc=$?"
gzip -9 $L/tl-*.rank*.jsonl
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
grep -v "^\[rank 0\] *$" $L/tl-p16j.log | head -16
