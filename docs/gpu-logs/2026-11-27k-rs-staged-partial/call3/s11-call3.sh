# Session 11, call 3 (4x H200): what the consumers' own-tile sum costs. mkernel-nosum
# (/tmp/nosum-control.diff: own tiles add no partial; wrong results, timing only) against HEAD,
# interleaved three times, RS and AR, world 2 (GPUs 0,1) and 1 x 4, 50 reps.
source "$(dirname "$0")/prep.sh"
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
bb() { local tag=$1 bin=$2; shift 2; timeout 150 $H/bin/$bin bench "$@" --shapes $S --reps 50 --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in 1 2 3; do
for op in gemm-rs gemm-ar; do
  for b in mkernel mkernel-nosum; do
    CUDA_VISIBLE_DEVICES=0,1 bb $op-w2-$b-r$rep $b $op --world 2
    bb $op-w4-$b-r$rep $b $op --world 4
  done
done
done
python3 - <<'PY'
import json,glob,os,collections
t=collections.defaultdict(list)
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    tag=os.path.basename(f)[:-6].rsplit('-r',1)[0]
    by={}
    for l in open(f):
        r=json.loads(l); by.setdefault(r['shape'],{})[r['impl']]=r['ms']
    for sh,v in by.items(): t[(tag,sh)].append((v['mkernel-fused'],v['mkernel-fused']/v['gemm-alone']))
for k in sorted(t): print(k[0].ljust(24), k[1].ljust(18), '  '.join(f'{a:.3f} ({b:.3f})' for a,b in t[k]))
PY
pack
