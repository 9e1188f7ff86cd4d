import json,glob,os,sys
pat=sys.argv[1] if len(sys.argv)>1 else '/tmp/logs/*.jsonl'
for f in sorted(glob.glob(pat)):
    tag=os.path.basename(f)[:-6]
    R={}
    for l in open(f):
        x=json.loads(l)
        if x.get('op')!='ag_gemm': continue
        R.setdefault(x['shape'],{})[x['impl']]=x
    for sh,d in R.items():
        fu=d.get('mkernel-fused'); ge=d.get('gemm-alone'); al=d.get('ag-alone-fused-split')
        if not fu: continue
        m,n,k=map(int,sh.split('x')); w=fu['world']
        s=f"{tag:24s} {sh:16s} fused {fu['ms']:.4f} gemm {ge['ms'] if ge else 0:.4f} alone {al['ms'] if al else 0:.4f}"
        if al: s+=f" ({m*k*2*(w-1)/w/al['ms']/1e6:.0f}GB/s)"
        s+=f" ov {fu.get('overlap_efficiency') or 0:.3f} vm {fu.get('overlap_vs_model') or 0:.3f} push {fu.get('push_ctas')} comp {fu.get('compute_ctas')} fwd {fu.get('fwd_ctas')} chunk {fu.get('chunk_rows')} eng {fu.get('engines')} path {fu.get('chosen_path')}"
        print(s)
    for l in open(f):
        x=json.loads(l)
        if x.get('op')!='ag_gemm' and 'gbps' in x and x.get('gbps'):
            print(f"{tag:24s} {x.get('shape')} {x['impl']} {x['ms']:.4f} {x['gbps']:.1f} GB/s")
