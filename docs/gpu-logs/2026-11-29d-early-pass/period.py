import json,gzip,collections,statistics as st,sys
for f in sys.argv[1:]:
    ev=[json.loads(l) for l in gzip.open(f)]
    ev=[e for e in ev if e["epoch"]==41]
    t0=min(e["t_ns"] for e in ev)
    cl=collections.defaultdict(list)
    for e in ev:
        if e["event"]==3: cl[e["cta"]].append((e["t_ns"]-t0)/1000)
    per=collections.defaultdict(list)
    for c,ts in cl.items():
        ts.sort()
        for a,b in zip(ts,ts[1:]): per[int(a//300)].append(b-a)
    print(f.split("/")[-2:], " ".join("%d-%dus:%.1f"%(k*300,k*300+300,st.median(v)) for k,v in sorted(per.items())))
