# Call 3 (x4): spread copies on the LSU path (two spare warps, 16-byte loads/stores) against
# TMA bulk; static and drawn walks; push beside.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x4096x8192,8192x8192x8192
A="ag-gemm --world 4 --nodes 1 --shapes $S"
bb push $A
bb lsu1 $A --spread true --spread-lsu
bb lsu2 $A --spread true --spread-lsu --spread-every 2
bb lsu4 $A --spread true --spread-lsu --spread-every 4
bb lsu1-dyn $A --spread true --spread-lsu --dynamic true
bb lsu2-dyn $A --spread true --spread-lsu --spread-every 2 --dynamic true
bb bulk1-dyn $A --spread true --dynamic true
bb bulk4p-dyn $A --spread true --spread-every 4 --spread-paced --dynamic true
bb bulk4p $A --spread true --spread-every 4 --spread-paced
bb push-dyn $A --dynamic true
bb push-b $A
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(10), ' | '.join(f"{s}: fused {v['mkernel-fused']:.3f} gemm {v['gemm-alone']:.3f} ag {v['ag-alone-fused-split']:.3f} ratio {v['mkernel-fused']/max(v['gemm-alone'],min(v['ag-alone-fused-split'],v['ag-alone-16cta'])):.3f}" for s,v in d.items()))
PY
pack
