# Session 14, call 8 (4x H200): is the fused launch at 2 x 2, 16384x4096x8192, slower with the
# comm-only wait shared by the CTA's threads? old (618212f's ag_gemm.rs), new (HEAD), pushonly
# (only the push CTA's wait shared; the spread side threads' as before), the order rotated.
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x4096x8192"
run() { local v=$1 rep=$2; local M=$H/bin/mkernel; [ $v != new ] && M=$H/bin/mkernel-$v; bb n2w4-$v-$rep $M bench ag-gemm --world 4 --nodes 2 $S; }
run new a; run old a; run pushonly a
run old b; run pushonly b; run new b
run pushonly c; run new c; run old c
python3 - $L <<'PY' | tee $L/ab.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/n2*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l)
        if r['impl'] in ('mkernel-fused','ag-alone-fused-split','gemm-alone'): rows[(tag,r['impl'])].append((round(r['ms'],3), round(r['overlap_vs_model'],3)))
for k in sorted(rows): print(k, rows[k])
PY
pack
