# Session 14, call 5 (2x H200): synccheck and racecheck over the standalone all-gather's SM copy
# modes at 1 x 2 (its `sync_threads_or` after thread 0's ready waits), and over AllGather + GEMM's
# rank check at 1 x 2 and 2 x 1 (HEAD's binary).
source "$(dirname "$0")/prep.sh"
CS=/usr/local/cuda/bin/compute-sanitizer
san() { local tag=$1 tool=$2 nodes=$3; shift 3; timeout 150 $H/bin/mkernel launch -n 2 --nodes $nodes --timeout-s 140 -- $CS --tool $tool --error-exitcode 9 $H/bin/mkernel rank-check "$@" > $L/cs-$tag.log 2>&1; local rc=$?; stamp "$tag rc=$rc $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $L/cs-$tag.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; }
for copy in bulk fan lsu pull; do
  san sync-ag-$copy synccheck 1 allgather --copy $copy --shard-bytes 1000003 --iters 2
  san race-ag-$copy racecheck 1 allgather --copy $copy --shard-bytes 1000003 --iters 2
done
san sync-agg-n1 synccheck 1 ag-gemm --shape 2000x1544x1032 --path fused --rounds 1
san sync-agg-n2 synccheck 2 ag-gemm --shape 2000x1544x1032 --path fused --rounds 1
pack
