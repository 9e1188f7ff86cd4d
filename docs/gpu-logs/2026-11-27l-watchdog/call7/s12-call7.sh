# Session 12, call 7 (2x H200): re-sweep the reduce-scatter's / all-reduce's lead at world 2 on the
# two 0.77 ms shapes (the ones above 1.05), with this session's code; three interleaved rounds.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
for op in gemm-rs gemm-ar; do
  timeout 140 $M tune $op --world 2 --shapes 16384x4096x8192,8192x8192x8192 --out $L/tune-$op.jsonl > $L/tune-$op.log 2>&1; stamp "tune $op rc=$?"
  grep -vE "^\s*$" $L/tune-$op.log | tail -14 | cut -c1-170
done
pack
