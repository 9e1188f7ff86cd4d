# Session 7, call 12 (2x H200): GEMM + AllReduce with owners pulling the partials (as the
# world-2 reduce-scatter does; GemmRsParams::owners_pull made `!push`; results correct), beside HEAD, world 2,
# three times interleaved.
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log $L/*.jsonl
S="--shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192"
for i in 1 2 3; do for b in mkernel mkernel-arpull; do
  timeout 60 $H/bin/$b bench gemm-ar --world 2 $S --json $L/ar-$b-$i.jsonl > $L/ar-$b-$i.log 2>&1; stamp "$b $i rc=$?"
done; done
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/ar-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[3:-6].ljust(20), '  '.join(f"{s} {v['mkernel-fused']:.3f}/{v['gemm-alone']:.3f}={v['mkernel-fused']/v['gemm-alone']:.3f}" for s,v in R.items()))
PY
pack
