# A/B of the MoE's fused ms and fused / max(alone) from {variant}-{rep}-moe-w{W}.jsonl: python3 abmoe.py DIR
import json,sys,glob,os,collections
d=sys.argv[1]; R=collections.defaultdict(dict)
for f in sorted(glob.glob(os.path.join(d,'*-*-moe-w*.jsonl'))):
    v,rep,rest=os.path.basename(f)[:-6].split('-',2)
    for l in open(f):
        x=json.loads(l)
        if x['impl']=='mkernel-fused': R[(rest,x['shape'])][(v,rep)]=(x['ms'],x['fused_over_ideal'])
for (rest,sh),m in sorted(R.items()):
    print(f"{rest:8s} {sh:26s} "+"  ".join(f"{v}-{r} {m[(v,r)][0]:.3f} ms ({m[(v,r)][1]:.3f})" for (v,r) in sorted(m)))
