import json,collections
ev={}
for r in range(4):
    ev[r]=[json.loads(l) for l in open(f'tl-ag.rank{r}.jsonl')]
E=41
T0={r:min(e["t_ns"] for e in ev[r] if e["epoch"]==E) for r in ev}
seen={}  # (fwd rank, src, chunk) -> t
for r in ev:
    for e in ev[r]:
        if e['epoch']==E and e['event']==5: seen[(r,e['a'],e['b'])]=(e["t_ns"]-T0[r])/1e3
shard=4096; rows=64
for r in range(4):
    claimed={}
    out=[]
    for e in ev[r]:
        if e['epoch']!=E: continue
        if e['event']==3: claimed[(e['cta'],e['a'])]=e['t_ns']
        if e['event']==4:
            c=claimed.get((e['cta'],e['a']))
            w=(e['t_ns']-c)/1e3
            m=e['b']>>16
            if w>5:
                src=m*128//shard; ch=(m*128-src*shard)//rows
                out.append(((e["t_ns"]-T0[r])/1e3,w,m,src,ch))
    out.sort()
    node=r//2; peer=r^1
    print(f'rank {r}: waited tiles (ready us, waited, m, src, chunk-pair, fwd seen at peer)')
    for t,w,m,src,ch in out[-3:]:
        s=seen.get((peer,src,ch+1)) or seen.get((peer,src,ch))
        s2=seen.get((r,src,ch+1))
        print(f'  {t:8.1f} w{w:6.1f} m{m:3d} src{src} ch{ch:2d}-{ch+1:2d}  peer-seen {s}  self-seen {s2}')
