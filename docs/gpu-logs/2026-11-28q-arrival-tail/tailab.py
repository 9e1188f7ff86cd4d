# fused / max(GEMM alone, modelled link) per variant from {layout}-{variant}-{rep}.jsonl: python3 tailab.py DIR
import json,sys,glob,os,collections
d=sys.argv[1]; R=collections.defaultdict(lambda: collections.defaultdict(list)); C=collections.defaultdict(list)
for f in sorted(glob.glob(os.path.join(d,'n*-*-*.jsonl'))):
    lay,v,rep=os.path.basename(f)[:-6].split('-')
    for l in open(f):
        x=json.loads(l)
        if x['impl']=='mkernel-fused':
            R[(lay,x['shape'])][v].append((round(x['ms'],3), round(x.get('overlap_vs_model',0),3), x.get('tail_tiles'), x.get('tail_ranges')))
        if x['impl']=='ag-alone-fused-split': C[(lay,x['shape'])].append(round(x['ms'],3))
for k in sorted(R):
    print(k, 'comm-only', C[k])
    for v in sorted(R[k]): print('   ', f"{v:6s}", R[k][v])
