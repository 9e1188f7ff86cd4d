# Session 8, call 9 (4x H200): 79160b8 + the tokens sent to other nodes after the counts and records (ship), when compute CTAs copy them (the early layout
# reverted). gpu_moe (every case up to 4 GPUs); bench moe 1 x 4 and 2 emulated nodes x 2 against
# e4f11f2 (mkernel-old), interleaved; torch_baselines.py moe at world 4 ran in call 7.
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads=1 > $L/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "^test |test result" $L/test-gpu_moe.log | sed 's/\[rank.*//' | tail -16
bb() { local tag=$1 X=$2 N=$3; shift 3; timeout 60 $H/bin/$X bench moe --world 4 --nodes $N "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
for b in mkernel-old mkernel; do bb w4n1-$b-1 $b 1; done
for i in 1 2; do for b in mkernel-old mkernel; do bb w4n2-$b-$i $b 2; done; done
python3 - <<'PY'
import json, glob, os
print('== moe (ms): config fused gemm-alone dispatch-alone unfused fused/max(alone)')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r.get('shape','?'),{})[r['impl']]=r['ms']
    for c,v in R.items():
        print(os.path.basename(f)[4:-6].ljust(20), str(c).ljust(26), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone','mkernel-unfused')), f"{v['mkernel-fused']/max(v['gemm-alone'],v.get('dispatch-alone',0)):.3f}")
PY
pack
