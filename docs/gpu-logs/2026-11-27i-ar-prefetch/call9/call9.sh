# Session 9, call 9 (4x H200): where the early layout (second version) hangs at 1 x 4. A debug
# build of moe-early-layout-v2's device code (mkernel-eldbg) whose rank 0 bounds every wait at a
# quarter of the others' timeout: if rank 0 is in a bounded wait, its report comes first.
source "$(dirname "$0")/prep.sh"
E=$H/bin/mkernel-eldbg
timeout 60 $E launch --nprocs 4 --timeout-s 50 -- $E rank-check moe --config 500x256x264x16x4 --timeout-ms 8000 > $OUT/rc-moe-1x4.log 2>&1; stamp "rank-check rc=$?"
grep -v 'within the contract' $OUT/rc-moe-1x4.log | cut -c1-400 | head -20
timeout 60 $E bench moe --world 4 --nodes 1 > $OUT/bench-moe-1x4.log 2>&1; stamp "bench rc=$?"
cut -c1-400 $OUT/bench-moe-1x4.log | tail -8
