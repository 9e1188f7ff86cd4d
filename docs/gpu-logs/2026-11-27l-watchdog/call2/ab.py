# A/B of fused / GEMM alone from bench JSON lines named {variant}-{rep}-{op}-w{W}.jsonl: python3 ab.py DIR
import json,sys,glob,os,collections
d=sys.argv[1]; R=collections.defaultdict(dict)
for f in sorted(glob.glob(os.path.join(d,'*-*-gemm-*-w*.jsonl'))):
    v,rep,rest=os.path.basename(f)[:-6].split('-',2)
    for l in open(f):
        x=json.loads(l)
        if x['impl']=='mkernel-fused': R[(rest,x['shape'])][(v,rep)]=x['fused_over_gemm']
for (rest,sh),m in sorted(R.items()):
    print(f"{rest:12s} {sh:18s} "+"  ".join(f"{v}-{r} {m[(v,r)]:.3f}" for (v,r) in sorted(m)))
