# Call 8 (x4): the spread copies where they are not the default: 2 x 2 (beside the forward
# CTAs; drawn walk with joining) and 1 x 2, each against the default, interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
for r in 1 2; do
bb n2-default-$r ag-gemm --world 4 --nodes 2 --shapes $S
bb n2-spread-$r ag-gemm --world 4 --nodes 2 --shapes $S --spread true
bb w2-default-$r ag-gemm --world 2 --nodes 1 --shapes $S
bb w2-spread-$r ag-gemm --world 2 --nodes 1 --shapes $S --spread true
done
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r
    print(os.path.basename(f)[:-6].ljust(14), ' '.join(f"{v['mkernel-fused']['ms']:.3f}/{v['mkernel-fused'].get('overlap_efficiency',0):.3f}/{v['mkernel-fused'].get('overlap_vs_model') or 0:.3f}" for s,v in d.items()))
PY
pack
