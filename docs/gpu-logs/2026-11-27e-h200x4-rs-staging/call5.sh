# Call 5 (x4): AllGather + GEMM across two emulated nodes of two at 16384x4096x8192 (1.105 of
# the link model, target 1.10): `tune ag-gemm` over push CTAs x rows per flag, then the default
# against the tune's best and forwarding CTAs 2 / 4, interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
timeout 240 $M tune ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 --push-ctas 6,8,10,12,16 --chunk-rows 32,64,128 --rounds 3 --out $L/tune-ag-2x2.jsonl > $L/tune-ag-2x2.log 2>&1; stamp "tune rc=$?"
BEST=$(python3 -c "
import json
r=[json.loads(l) for l in open('/tmp/logs/tune-ag-2x2.jsonl')]
b=min(r,key=lambda x:x['fused_ms']); print(b['push_ctas'], b['chunk_rows'])")
set -- $BEST; P=$1; R=$2; stamp "best push $P rows $R"
for i in 1 2; do
  bb def-$i
  bb best-$i --push-ctas $P --chunk-rows $R
  bb fwd4-$i --fwd-ctas 4
  bb best-fwd4-$i --push-ctas $P --chunk-rows $R --fwd-ctas 4
done
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    if 'tune' in f: continue
    for l in open(f):
        r=json.loads(l)
        if r['impl']=='mkernel-fused':
            print(os.path.basename(f)[:-6].ljust(12), f"{r['ms']:.3f} vs model {r.get('overlap_vs_model') or 0:.3f} push {r.get('push_ctas')} rows {r.get('chunk_rows')} fwd {r.get('fwd_ctas')}")
PY
tail -20 $L/tune-ag-2x2.log
pack
