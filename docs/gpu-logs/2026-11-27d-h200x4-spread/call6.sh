# Call 6 (x4): the spread copies fanned out (each vector loaded once, stored to every rank) and
# the default hybrid (4 push CTAs on every other chunk, every 4th compute CTA's spare warps on
# the rest) against every 6th / 8th CTA and push on every 3rd chunk; push alone beside.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
A="ag-gemm --world 4 --nodes 1 --shapes $S"
for r in 1 2; do
bb push-$r $A --spread false
bb e4-$r $A
done
bb e6 $A --spread-every 6
bb e8 $A --spread-every 8
bb e3 $A --spread-every 3
bb e6-k3 $A --spread-every 6 --spread-push-every 3
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(11), ' '.join(f"{v['mkernel-fused']:.3f}/{v['mkernel-fused']/max(v['gemm-alone'],min(v['ag-alone-fused-split'],v['ag-alone-16cta'])):.3f}" for s,v in d.items()))
PY
pack
