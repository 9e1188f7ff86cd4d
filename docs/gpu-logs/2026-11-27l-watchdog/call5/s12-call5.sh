# Session 12, call 5 (2x H200): racecheck and synccheck over `rank-check moe` at 1 x 2 with the
# skipped-source verdict in `pull_item` (HEAD), both paths (the check runs unfused then fused).
source "$(dirname "$0")/prep.sh"
CS=/usr/local/cuda/bin/compute-sanitizer
san() { local tag=$1 tool=$2; shift 2; timeout 120 $H/bin/mkernel launch -n 2 --timeout-s 110 -- $CS --tool $tool --error-exitcode 9 $H/bin/mkernel rank-check moe "$@" --rounds 1 --back-to-back 2 --timeout-ms 100000 > $L/cs-$tag.log 2>&1; local rc=$?; stamp "$tag rc=$rc $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $L/cs-$tag.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; }
san racecheck-moe racecheck
san synccheck-moe synccheck
pack
