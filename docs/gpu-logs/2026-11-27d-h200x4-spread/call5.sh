# Call 5 (x4): push CTAs and spread copies together: 4 push CTAs (128 compute CTAs divide every
# shape's tiles) take every 2nd / 3rd chunk, every 2nd / 3rd / 4th compute CTA's spare warps
# (LSU) the rest; push alone beside, interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
A="ag-gemm --world 4 --nodes 1 --shapes $S"
H4="--spread true --spread-lsu --push-ctas 4"
for r in 1 2; do
bb push-$r $A
bb h-e4-k2-$r $A $H4 --spread-every 4
bb h-e3-k2-$r $A $H4 --spread-every 3
done
bb h-e4-k3 $A $H4 --spread-every 4 --spread-push-every 3
bb h-e2-k2 $A $H4 --spread-every 2
bb h-e6-k2 $A $H4 --spread-every 6
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(11), ' '.join(f"{v['mkernel-fused']:.3f}/{v['mkernel-fused']/max(v['gemm-alone'],min(v['ag-alone-fused-split'],v['ag-alone-16cta'])):.3f}" for s,v in d.items()))
PY
pack
