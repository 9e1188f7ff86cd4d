# Session 8, call 4 (2x H200): compute CTAs copy own tokens into x_heap from the launch's start
# (before the layout) in a fused launch. gpu_moe (all, MKERNEL_REQUIRE_GPU=1) on it; bench moe
# world 2 against 187ac37 (mkernel-old, early layout), interleaved twice; then its timeline
# (stamps5: buffered %globaltimer stamps).
source "$(dirname "$0")/prep.sh"
O=$H/bin/mkernel-old; NEW=$H/bin/mkernel
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe --test-threads=1 > $L/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "^test |test result" $L/test-gpu_moe.log | tail -16
bb() { local tag=$1 X=$2 W=$3; shift 3; timeout 60 $X bench moe --world $W --nodes 1 "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
for i in 1 2; do
  bb w2-ds-el-$i $O 2 $DS; bb w2-ds-earlyx-$i $NEW 2 $DS
  bb w2-mx-el-$i $O 2 $MX; bb w2-mx-earlyx-$i $NEW 2 $MX
done
python3 - <<'PY'
import json, glob, os
print('== moe (ms): fused gemm-alone dispatch-alone fused/gemm')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    v={}
    for l in open(f):
        r=json.loads(l); v[r['impl']]=r['ms']
    print(os.path.basename(f)[4:-6].ljust(20), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone')), f"{v['mkernel-fused']/v['gemm-alone']:.3f}")
PY
for c in 4096x7168x2048x256x8 8192x4096x14336x8x2; do
  timeout 60 $H/bin/mkernel-stamps bench moe --world 2 --configs $c --warmup 2 --reps 4 > $L/stamps-$c.log 2>&1; stamp "$c rc=$?"
done
python3 - <<'PY'
import glob,collections
for f in sorted(glob.glob('/tmp/logs/stamps-*.log')):
    ev=collections.defaultdict(list)
    for l in open(f):
        i=l.find('MKSTAMP')
        if i<0: continue
        e,mode,what,who,t=map(int,l[i:].split()[1:6])
        ev[(e,mode)].append((what,who,t))
    print(f.split('stamps-')[1][:-4])
    names={0:'entry',1:'routed',2:'shipped',3:'laid out',4:'xready',5:'helper done',6:'gemm done',7:'all items',8:'pull0 done',9:'counted',10:'count barrier',11:'records written',12:'records barrier',13:'done waited',14:'counts in',15:'done waited(sc)',16:'counts sent',17:'compute x done',18:'compute layout',19:'compute x copied'}
    for (e,mode),xs in sorted(ev.items()):
        if mode != 0: continue
        t0=min(t for _,_,t in xs)
        print(f"  epoch {e} mode {mode}: "+', '.join(f"{names[w]}[{who}] {(t-t0)/1000:.1f}" for w,who,t in sorted(xs,key=lambda x:x[2]) if w not in (9,10,11,12,13,15,16,17)))
PY
pack
