import json,glob,os,collections
R=collections.defaultdict(list)
for f in sorted(glob.glob('/tmp/logs/n*-*-*.jsonl')):
    lay,v,rep=os.path.basename(f)[:-6].split('-')
    for l in open(f):
        x=json.loads(l); R[(lay,x['shape'],v,x['impl'])].append(x)
for (lay,sh,v,imp),xs in sorted(R.items()):
    if imp not in ('mkernel-fused','ag-alone-fused-split','gemm-alone'): continue
    m,n,k=map(int,sh.split('x'))
    out=[]
    for x in xs:
        s=f"{x['ms']:.4f}"
        if imp=='mkernel-fused': s+=f" ov {x.get('overlap_efficiency',0):.3f} vm {x.get('overlap_vs_model') or 0:.3f}"
        if imp=='ag-alone-fused-split':
            w=int(lay[3]); s+=f" {m*k*2*(w-1)/w/x['ms']/1e6:.0f}GB/s"
        out.append(s)
    print(lay, sh, v, imp, ' | '.join(out))
