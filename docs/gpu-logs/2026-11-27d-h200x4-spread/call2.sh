# Call 2 (x4): why spread copies slow the GEMM: the spread all-gather alone (every compute CTA
# copying over no tiles), fewer copying CTAs (every 2 / 4 / 8), paced pieces; push beside.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x4096x8192,8192x8192x8192
A="ag-gemm --world 4 --nodes 1 --shapes $S"
bb push $A
bb sp1 $A --spread true
bb sp1-paced $A --spread true --spread-paced
bb sp2 $A --spread true --spread-every 2
bb sp4 $A --spread true --spread-every 4
bb sp8 $A --spread true --spread-every 8
bb sp4-paced $A --spread true --spread-every 4 --spread-paced
bb sp16 $A --spread true --spread-every 16
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
