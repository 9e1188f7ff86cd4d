# Session 8, call 2 (2x H200): the MoE start-up timeline on branch moe-early-layout (stamps3.diff), world 2, both configs.
# %globaltimer printed by thread 0 at each step, rank 0, launches 10-17), world 2, DeepSeek-like
# and Mixtral-like with the tuned defaults, few launches.
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log
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
    names={0:'entry',1:'routed',2:'shipped',3:'laid out',4:'xready',5:'helper done',6:'gemm done',7:'all items',8:'pull0 done',9:'counted',10:'count barrier',11:'records written',12:'records barrier',13:'done waited',14:'counts in',15:'done waited(sc)',16:'counts sent',17:'compute entry',18:'compute layout'}
    for (e,mode),xs in sorted(ev.items()):
        t0=min(t for _,_,t in xs)
        print(f"  epoch {e} mode {mode}: "+', '.join(f"{names[w]}[{who}] {(t-t0)/1000:.1f}" for w,who,t in sorted(xs,key=lambda x:x[2])))
PY
pack
