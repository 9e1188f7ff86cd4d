# Call 4 (x4): spread on the LSU path at the four shapes: every 2 / 3, 16 KiB units, tail off;
# push beside, interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
A="ag-gemm --world 4 --nodes 1 --shapes $S"
for r in 1 2; do
bb push-$r $A
bb lsu2-$r $A --spread true --spread-lsu --spread-every 2
bb lsu3-$r $A --spread true --spread-lsu --spread-every 3
done
bb lsu2-u16k $A --spread true --spread-lsu --spread-every 2 --spread-unit 16384
bb lsu2-notail $A --spread true --spread-lsu --spread-every 2 --tail-split false
bb lsu2-u256k $A --spread true --spread-lsu --spread-every 2 --spread-unit 262144
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(11), ' '.join(f"{v['mkernel-fused']:.3f}/{v['mkernel-fused']/max(v['gemm-alone'],min(v['ag-alone-fused-split'],v['ag-alone-16cta'])):.3f}" for s,v in d.items()))
PY
pack
