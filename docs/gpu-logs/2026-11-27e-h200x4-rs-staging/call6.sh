# Call 6 (x4): MoE with the dispatch's row stores into xe carrying an L2 evict-first policy,
# against the default, both configs at 1 x 4, interleaved twice; one rank-check with it.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 120 $M bench moe --world 4 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for r in 1 2; do
  bb base-$r
  bb evict-$r --xe-evict-first
done
timeout 120 $M launch -n 4 -- $M rank-check moe --config 1024x4096x1024x32x8 --routing skewed --rounds 2 --graph --xe-evict-first > $L/check-evict.log 2>&1; stamp "rank-check evict rc=$?"
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r
    for s,v in d.items():
        g=lambda k: v[k]['ms'] if k in v else float('nan')
        print(os.path.basename(f)[:-6].ljust(9), s[:22].ljust(22), f"fused {g('mkernel-fused'):.3f} unfused {g('mkernel-unfused'):.3f} gemm {g('gemm-alone'):.3f} dispatch {g('dispatch-alone'):.3f} fused/gemm {g('mkernel-fused')/g('gemm-alone'):.3f}")
PY
tail -3 $L/check-evict.log
pack
