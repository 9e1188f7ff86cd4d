# Call 7 (x4): the pushed reduce-scatter's lead at 1 x 4: 22 / 33 / 44 / 66 / 99 / 132 rounds,
# interleaved twice, with the pulled default beside; torch multi at world 4.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
rs() { local tag=$1; shift; timeout 60 $M bench gemm-rs "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for r in 1 2; do
  rs rs-w4-pull-$r --world 4 --push off
  for l in 22 33 44 66 99 132; do rs rs-w4-push-l$l-$r --world 4 --push on --lead $l; done
done
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
cd $L && python3 - <<'PY'
import json
t={}
for l in open('torch-multi-w4.jsonl'):
    x=json.loads(l)
    if x.get('op')=='gemm_rs': t[f"{x['m']}x{x['n']}x{x['k']}"]=x
import glob
for f in sorted(glob.glob('rs-w4-*.jsonl')):
    R={}
    for l in open(f):
        x=json.loads(l); R[(x['shape'],x['impl'])]=x
    o=[]
    for sh in ['16384x8192x8192','16384x4096x8192','32768x4096x8192','8192x8192x8192']:
        fu=R[(sh,'mkernel-fused')]['ms']; g=R[(sh,'gemm-alone')]['ms']; c=t[sh]['comm_alone_ms']
        o.append(f"{fu:.3f}/{fu/max(g,c):.3f}")
    print(f, ' '.join(o))
PY
cd - >/dev/null
pack
