# Session 14, call 3 (2x H200): the MoE's one-thread verdicts through `barrier.red.or`
# (`sync_threads_or`) in route, ship and pull_item, instead of a shared word and two barriers:
# racecheck and synccheck over `rank-check moe` at 1 x 2, gpu_moe on 2 GPUs, and
# `bench moe` at world 2 against call 1's binary (old), interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
CS=/usr/local/cuda/bin/compute-sanitizer
san() { local tag=$1 tool=$2; shift 2; timeout 120 $H/bin/mkernel launch -n 2 --timeout-s 110 -- $CS --tool $tool --error-exitcode 9 $H/bin/mkernel rank-check moe "$@" --rounds 1 --back-to-back 2 --timeout-ms 100000 > $L/cs-$tag.log 2>&1; local rc=$?; stamp "$tag rc=$rc $(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' $L/cs-$tag.log | sort | uniq -c | tr -s ' ' | tr '\n' ';')"; }
san racecheck-moe racecheck
san synccheck-moe synccheck
bb() { local tag=$1; shift; timeout 200 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b; do
  bb moe-old-$rep $H/bin/mkernel-old bench moe --world 2
  bb moe-new-$rep $H/bin/mkernel bench moe --world 2
done
MKERNEL_REQUIRE_GPUS=2 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/gpu_moe.log 2>&1
stamp "gpu_moe rc=$? $(grep 'test result' $L/gpu_moe.log)"
python3 - $L <<'PY' | tee $L/ab.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/moe-*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l); rows[(r.get('config') or r.get('shape'),tag,r['impl'])].append(round(r['ms'],3))
for k in sorted(rows, key=str): print(k, rows[k])
PY
pack
