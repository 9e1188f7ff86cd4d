# Session 14, call 4 (2x H200): the arrival tail (--tail-ways N: the walk's last group of tile
# rows cut into N k-ranges per tile) at 2 emulated nodes x 1, four large shapes, against none,
# interleaved twice; then gpu_ag_gemm on 2 GPUs (new cases with --tail-ways).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 200 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb n2w2-none-$rep $M bench ag-gemm --world 2 --nodes 2 $S
  bb n2w2-t2-$rep $M bench ag-gemm --world 2 --nodes 2 $S --tail-ways 2
  bb n2w2-t4-$rep $M bench ag-gemm --world 2 --nodes 2 $S --tail-ways 4
done
MKERNEL_REQUIRE_GPUS=2 timeout 330 $H/bin/test-gpu_ag_gemm --test-threads 1 > $L/gpu_ag_gemm.log 2>&1
stamp "gpu_ag_gemm rc=$? $(grep 'test result' $L/gpu_ag_gemm.log)"
python3 - $L <<'PY' | tee $L/ab.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/n2*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l)
        if r['impl']=='mkernel-fused': rows[(r['shape'],tag)].append((round(r['ms'],3), round(r['overlap_vs_model'],3), r.get('tail_tiles'), r.get('tail_ranges')))
        if r['impl']=='ag-alone-fused-split': rows[(r['shape'],tag,'comm')].append(round(r['ms'],3))
for k in sorted(rows): print(k, rows[k])
PY
pack
