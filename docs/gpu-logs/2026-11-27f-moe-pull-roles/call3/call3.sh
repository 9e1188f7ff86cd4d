# Call 3 (x4): an instrumented build (vprintf of per-CTA clock64 breakdowns from the streaming
# pull; not committed) at 1 x 4 and 1 x 1: where a moving CTA's time goes.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
rm -f $L/*.log $L/*.jsonl
bb() { local tag=$1; shift; timeout 60 $M bench moe --warmup 2 --reps 3 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
bb ds-24-5-q2 --world 4 --nodes 1 --configs 4096x7168x2048x256x8 --pull-ctas 24 --run-records 5 --queue 2
bb ds-8-16-q4 --world 4 --nodes 1 --configs 4096x7168x2048x256x8 --pull-ctas 8 --run-records 16 --queue 4
bb mx-8-16-q4 --world 4 --nodes 1 --configs 8192x4096x14336x8x2 --pull-ctas 8 --run-records 16 --queue 4
bb w1-ds-8-16-q4 --world 1 --configs 16384x7168x2048x256x2 --pull-ctas 8 --run-records 16 --queue 4
python3 - <<'PY'
import re, glob, os, json, statistics as st
T={0:(0,1,2,3,4,5,9),1:(0,1,2,3,7)}
N={0:'run slotw drain store load finish pieces slots drains open -',1:'acq claim flag stage items batches x total - - -'}
for f in sorted(glob.glob('/tmp/logs/*.log'), key=os.path.getmtime):
    if 'stamps' in f: continue
    d={}
    for l in open(f):
        m=re.search(r'MOEDBG (\d+) rank (\d+) cta (\d+): (.*)', l)
        if m: d.setdefault(int(m[1]), []).append([int(x) for x in m[4].split()])
    print(os.path.basename(f))
    for k,vs in sorted(d.items()):
        kind=k%10%2; who='pull' if k%10<2 else 'helper'; mode=k//10
        med=[st.median(c) for c in zip(*vs)]
        print(f"  mode {mode} {who} {'mover' if kind==0 else 'stager'} n={len(vs)}: {N[kind]}")
        print('    ', ' '.join(f'{x/1980:.0f}us' if i in T[kind] else f'{x:.0f}' for i,x in enumerate(med)))
    try:
        for l in open(f[:-4]+'.jsonl'):
            r=json.loads(l); print('   ', r['impl'], f"{r['ms']:.3f}")
    except Exception as e: print(e)
PY
pack
