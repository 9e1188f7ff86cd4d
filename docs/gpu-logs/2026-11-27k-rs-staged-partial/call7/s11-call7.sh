# Session 11, call 7 (2x H200): compute-sanitizer racecheck / synccheck over rank-check gemm-rs /
# gemm-ar at 1 x 2 with the staged partial (c504212's code): pulled + prefetched (the default),
# pushed, pulled without prefetches, the all-reduce's two phases.
source "$(dirname "$0")/prep.sh"
CS=/usr/local/cuda/bin/compute-sanitizer
san() { local tag=$1 tool=$2; shift 2; timeout 55 $H/bin/mkernel launch -n 2 --timeout-s 50 -- $CS --tool $tool --error-exitcode 9 $H/bin/mkernel rank-check "$@" --rounds 1 --back-to-back 2 --timeout-ms 45000 > $L/cs-$tag.log 2>&1; local rc=$?; stamp "$tag rc=$rc $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $L/cs-$tag.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; }
san racecheck-rs-prefetch racecheck gemm-rs
san racecheck-ar-prefetch racecheck gemm-ar --one-shot false
san racecheck-rs-push racecheck gemm-rs --push true
san synccheck-rs-pull synccheck gemm-rs --prefetch false
pack
