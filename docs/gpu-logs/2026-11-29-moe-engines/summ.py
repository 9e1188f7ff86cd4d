# Per bench jsonl in DIR: shape, fused ms, GEMM alone, dispatch alone, fused / max(alone), engines.
import json,sys,glob,os,collections
d=sys.argv[1]
for f in sorted(glob.glob(os.path.join(d,'*.jsonl'))):
    if 'torch' in f: continue
    R=collections.defaultdict(dict)
    for l in open(f):
        x=json.loads(l); R[x['shape']][x['impl']]=x
    tag=os.path.basename(f)[:-6]
    for sh,m in R.items():
        fz=m.get('mkernel-fused')
        if not fz: continue
        g=m.get('gemm-alone',{}).get('ms',0); dp=m.get('dispatch-alone',{}).get('ms',0)
        print(f"{tag:10s} {sh:26s} fused {fz['ms']:.3f} unfused {m.get('mkernel-unfused',{}).get('ms',0):.3f} gemm {g:.3f} disp {dp:.3f} ratio {fz['fused_over_ideal']:.3f} pull {fz.get('pull_ctas')} ce {fz.get('engines')}")
