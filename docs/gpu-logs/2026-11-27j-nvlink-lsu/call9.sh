# Session 10, call 9 (4x H200): the all-gather's copy x CTAs at mid sizes (4 / 16 / 64 MiB
# outputs), host barrier, interleaved twice: which rule should `auto` follow below 8 MiB shards?
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
ag() { local tag=$1; shift; timeout 60 $M bench allgather --sizes 4M,16M,64M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1 || echo "$tag failed"; }
for rep in 1 2; do
  for c in "fan 16" "lsu 16" "lsu 32" "lsu 64"; do set -- $c; ag w4-$1$2-r$rep --world 4 --copy $1 --intra-ctas $2; done
  for c in "bulk 16" "lsu 16" "lsu 32" "lsu 64"; do set -- $c; CUDA_VISIBLE_DEVICES=0,1 ag w2-$1$2-r$rep --world 2 --copy $1 --intra-ctas $2; done
done
stamp sweep
python3 - <<'PY'
import json,glob,os,collections
t=collections.defaultdict(list)
for f in sorted(glob.glob('/tmp/logs/w*.jsonl')):
    tag=os.path.basename(f)[:-6].rsplit('-r',1)[0]
    for l in open(f):
        r=json.loads(l)
        if r['impl'] in ('mkernel','copy-engine-allgather-stepped'): t[(tag,r['impl'],int(r['shape']))].append(r['gbps'])
for k in sorted(t): print(k[0].ljust(10), k[1][:16].ljust(16), str(k[2]>>20).rjust(3)+'M', ' '.join(f'{v:.0f}' for v in t[k]))
PY
pack
