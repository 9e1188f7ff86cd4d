# Session 19, call 3 (2x H200): what the FIFO's released position costs across emulated nodes.
# The binary before it (mkernel-old, 3c70fda) against this session's (8776e01's tree), interleaved
# twice: bench moe and bench ag-gemm at 2 nodes x 1 GPU.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for round in 1 2; do
  for b in mkernel-old mkernel; do
    timeout 150 $H/bin/$b bench moe --world 2 --nodes 2 --json $L/moe-$b-$round.json > $L/moe-$b-$round.txt 2>&1; stamp "moe $b round $round rc=$?"
    timeout 100 $H/bin/$b bench ag-gemm --world 2 --nodes 2 --shapes 16384x4096x8192,8192x8192x8192 --json $L/ag-$b-$round.json > $L/ag-$b-$round.txt 2>&1; stamp "ag $b round $round rc=$?"
  done
done
pack
cat $L/stamps.txt
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.json')):
    d={}
    for l in open(f):
        try: r=json.loads(l)
        except Exception: continue
        d.setdefault(r.get('shape', '?'),{})[r.get('impl')]=r
    for s,v in d.items():
        g=lambda k: v[k]['ms'] if k in v else float('nan')
        alone = max(g('gemm-alone'), g('dispatch-alone')) if 'dispatch-alone' in v else g('gemm-alone')
        print(os.path.basename(f)[:-5].ljust(18), str(s)[:26].ljust(26), f"fused {g('mkernel-fused'):.3f} unfused {g('mkernel-unfused'):.3f} gemm {g('gemm-alone'):.3f} dispatch {g('dispatch-alone'):.3f} fused/max(alone) {g('mkernel-fused')/alone:.3f}")
PY
for f in $L/ag-*.txt; do echo "== $(basename $f)"; grep -E "overlap" $f | head -3; done
