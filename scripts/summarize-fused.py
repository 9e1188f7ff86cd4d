# The fused-op tables of docs/PERF.md from one device call's JSON lines (bench ag-gemm / gemm-rs / gemm-ar
# and torch_baselines.py multi): python3 scripts/summarize-fused.py DIR [PREFIX], e.g. DIR call5-
import json,sys,os
d=sys.argv[1]; pre=sys.argv[2] if len(sys.argv) > 2 else ""
def load(f):
    p=os.path.join(d,pre+f)
    return [json.loads(l) for l in open(p)] if os.path.exists(p) else []
def torch(w):
    t={}
    for x in load(f'torch-multi-w{w}.jsonl'):
        if x.get('op') in ('gemm_rs','gemm_ar','ag_gemm'):
            t[(x['op'],f"{x['m']}x{x['n']}x{x['k']}")]=x
    return t
for w in (4,2):
  T=torch(w)
  for op,fn in (('ag_gemm','ag'),('gemm_rs','gemm-rs'),('gemm_ar','gemm-ar')):
    for n in (1,2):
      R={}
      for x in load(f'{fn}-w{w}-n{n}.jsonl'): R[(x['shape'],x['impl'])]=x
      if not R: continue
      print(f"\n{op} world {w} nodes {n}")
      print("| shape | fused | unfused | GEMM alone | comm alone | overlap | vs model | NCCL+cuBLAS | async-TP | knobs |")
      print("|---|---|---|---|---|---|---|---|---|---|")
      for sh in ['16384x8192x8192','16384x4096x8192','32768x4096x8192','8192x8192x8192','2048x4096x4096']:
        if (sh,'mkernel-fused') not in R: continue
        f=R[(sh,'mkernel-fused')]; fu=f['ms']; un=R[(sh,'mkernel-unfused')]['ms']; g=R[(sh,'gemm-alone')]['ms']
        tt=T.get((op,sh),{})
        if op=='ag_gemm':
            c=R.get((sh,'ag-alone-unfused'),R.get((sh,'ag-alone-16cta')))['ms']; ov=fu/max(g,c)
            knobs=f"push {f['push_ctas']} rows {f['chunk_rows']} compute {f['compute_ctas']} tail {f.get('tail_tiles', 0)}"
        else:
            c=tt.get('comm_alone_ms',float('nan')); ov=fu/max(g,c)
            knobs=f"lead {f.get('lead')} ir {f.get('inter_reduce_ctas')} group {f.get('group')} compute {f.get('compute_ctas')}"
        vm=f.get('overlap_vs_model'); vm=f"{vm:.3f}" if vm else "-"
        nc=tt.get('nccl_cublas_ms'); at=tt.get('async_tp_ms')
        ncs=f"{nc:.3f} ({nc/fu:.2f}x)" if nc else "-"; ats=f"{at:.3f} ({at/fu:.2f}x)" if at else "-"
        print(f"| {sh} | {fu:.3f} | {un:.3f} | {g:.3f} | {c:.3f} | {ov:.3f} | {vm} | {ncs} | {ats} | {knobs} |")
