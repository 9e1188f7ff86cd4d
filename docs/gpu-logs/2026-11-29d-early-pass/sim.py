import numpy as np
rng=np.random.default_rng(1)
T,E,K=4096,128,8
def sim(E=128,T=4096,K=8,wave=132,ntile=8):
    idx=np.array([rng.choice(E,K,replace=False) for _ in range(T)])
    lead=idx.min(1)
    order=np.lexsort((np.arange(T),lead))   # record processing order
    rank=np.empty(T,int); rank[order]=np.arange(T)  # record index of token
    res={}
    for pos in ("token","record"):
        comp=[]  # (expert, tilerow, completion record index)
        for e in range(E):
            toks=np.where((idx==e).any(1))[0]
            if pos=="token": toks=np.sort(toks)
            else: toks=toks[np.argsort(rank[toks])]
            for m in range(0,len(toks),128):
                comp.append((e,m//128,rank[toks[m:m+128]].max()+1))
        comp_arr=np.array([c[2] for c in comp])
        rows_needed=wave/ntile
        # expert-order walk: first wave tile rows
        n=int(np.ceil(rows_needed))
        exp_order=comp_arr[:n].max()/T
        # readiness order walk
        ready=np.sort(comp_arr)[n-1]/T
        # waves: when does wave w need?
        res[pos]=(exp_order,ready, [np.sort(comp_arr)[min(len(comp_arr)-1,int(np.ceil(w*rows_needed))-1)]/T for w in (1,2,3,4,6,8)], [comp_arr[:min(len(comp_arr),int(np.ceil(w*rows_needed)))].max()/T for w in (1,2,3,4,6,8)])
    return res
for E in (128,64):
    r=sim(E=E)
    for k,v in r.items(): print(E,k,"expert-walk first wave needs %.2f, ready-order %.2f"%(v[0],v[1]), "ready-order waves", ["%.2f"%x for x in v[2]], "expert waves", ["%.2f"%x for x in v[3]])
