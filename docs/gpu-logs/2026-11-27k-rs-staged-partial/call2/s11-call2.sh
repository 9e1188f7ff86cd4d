# Session 11, call 2 (4x H200): where a GEMM + RS / AR compute CTA's time goes (mkernel-prof:
# /tmp/rs-prof.diff, globaltimer sums over launches 11-18 of each op, printed per launch), beside
# HEAD's binary for the timings, world 2 (GPUs 0,1) and 1 x 4.
source "$(dirname "$0")/prep.sh"
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
bb() { local tag=$1 bin=$2; shift 2; timeout 150 $H/bin/$bin bench "$@" --shapes $S --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for op in gemm-rs gemm-ar; do
  CUDA_VISIBLE_DEVICES=0,1 bb $op-w2-prof mkernel-prof $op --world 2
  CUDA_VISIBLE_DEVICES=0,1 bb $op-w2-head mkernel $op --world 2
  bb $op-w4-prof mkernel-prof $op --world 4
  bb $op-w4-head mkernel $op --world 4
done
python3 - <<'PY'
import json,glob,os,re,collections
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    by={}
    for l in open(f):
        r=json.loads(l); by.setdefault(r['shape'],{})[r['impl']]=r['ms']
    for sh,v in by.items():
        print(os.path.basename(f)[:-6].ljust(16), sh.ljust(18), ' '.join(f"{k[8:] if k.startswith('mkernel-') else k}={t:.3f}" for k,t in v.items()), 'f/g=%.3f'%(v['mkernel-fused']/v['gemm-alone']))
# MKPROF: per log, the lines in order (one per launch per rank); print means per shape block of 8 launches x ranks
for f in sorted(glob.glob('/tmp/logs/*prof.log')):
    rows=[]
    for l in open(f):
        if 'MKPROF' not in l: continue
        d=dict(re.findall(r'(\w+)=(\d+)', l)); rows.append({k:int(v) for k,v in d.items()})
    print(os.path.basename(f), len(rows), 'lines')
    # group consecutive lines into blocks of (8 launches * ranks)
    w=2 if '-w2-' in f else 4
    for b in range(0, len(rows), 8*w):
        blk=rows[b:b+8*w]
        if not blk: break
        s=collections.Counter()
        for r in blk:
            for k,v in r.items(): s[k]+=v
        n=len(blk); wgs=2*s['ctas']/n
        wall=s['wall']/n
        cons=wall*wgs  # consumer-WG ns per launch
        print(f"  block {b//(8*w)}: wall {wall/1e3:.1f} us, per-WG share of wall: store {s['store']/n/cons:.3f} ready {s['ready']/n/cons:.3f} sum {s['sum']/n/cons:.3f} free {s['free']/n/cons:.3f}; helper: staged {s['staged']/n/cons:.3f} send {s['send']/n/cons:.3f} pref {s['pref']/n/cons:.3f} ownwait {s['ownwait']/n/cons:.3f} ownstore {s['ownstore']/n/cons:.3f}; tiles/WG {s['tiles']/n/wgs:.1f} own/WG {s['own']/n/wgs:.1f}")
PY
pack
