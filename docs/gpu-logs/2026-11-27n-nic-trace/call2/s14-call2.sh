# Session 14, call 2 (2x H200): the comm-only launch's wait shared by the CTA's threads
# (new) against one thread checking the flags in turn (old, call 1's binary), interleaved twice:
# AllGather + GEMM at 2 x 1 and 1 x 2, 16384x4096x8192; then gpu_ag_gemm on 2 GPUs.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x4096x8192,8192x8192x8192"
for rep in a b; do
  for v in old new; do
    M=$H/bin/mkernel; [ $v = old ] && M=$H/bin/mkernel-old
    bb n2-$v-$rep $M bench ag-gemm --world 2 --nodes 2 $S
    bb n1-$v-$rep $M bench ag-gemm --world 2 $S
  done
done
MKERNEL_REQUIRE_GPUS=2 timeout 300 $H/bin/test-gpu_ag_gemm --test-threads 1 > $L/gpu_ag_gemm.log 2>&1
stamp "gpu_ag_gemm rc=$? $(grep 'test result' $L/gpu_ag_gemm.log)"
python3 - $L <<'PY' | tee $L/ab.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/n*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l); rows[(r['shape'] if 'shape' in r else (r.get('m'),r.get('n'),r.get('k')),tag,r['impl'])].append(round(r['ms'],3))
for k in sorted(rows, key=str): print(k, rows[k])
PY
pack
