# Session 14, call 7 (4x H200): the comm-only launch's wait shared by the CTA's threads (new)
# against one thread checking the flags in turn (old: the same build with 618212f's ag_gemm.rs)
# at 2 x 2, interleaved twice; gpu_ag_gemm on 4 GPUs (the engine's traps through `sync::stop`).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x4096x8192,8192x8192x8192"
for rep in a b; do
  bb n2w4-old-$rep $H/bin/mkernel-old bench ag-gemm --world 4 --nodes 2 $S
  bb n2w4-new-$rep $H/bin/mkernel bench ag-gemm --world 4 --nodes 2 $S
done
MKERNEL_REQUIRE_GPUS=4 timeout 330 $H/bin/test-gpu_ag_gemm --test-threads 1 > $L/gpu_ag_gemm.log 2>&1
stamp "gpu_ag_gemm rc=$? $(grep 'test result' $L/gpu_ag_gemm.log)"
python3 - $L <<'PY' | tee $L/ab.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/n2*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l); rows[(r['shape'],tag,r['impl'])].append((round(r['ms'],3), r.get('overlap_vs_model') and round(r['overlap_vs_model'],3)))
for k in sorted(rows): print(k, rows[k])
PY
pack
