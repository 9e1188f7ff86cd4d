import json,sys,gzip,statistics as st
f=sys.argv[1]; ncomp=int(sys.argv[2])
ev=[json.loads(l) for l in gzip.open(f)]
ep=41
ev=[e for e in ev if e["epoch"]==ep]
t0=min(e["t_ns"] for e in ev)
us=lambda e:(e["t_ns"]-t0)/1000
first_claim={};first_ready={};pulled={};ends={}
claims=[]
for e in ev:
    c=e["cta"]
    if e["event"]==3:
        claims.append((us(e),c,e["a"]))
        first_claim.setdefault(c,us(e)); first_claim[c]=min(first_claim[c],us(e))
    if e["event"]==4:
        first_ready[c]=min(first_ready.get(c,1e9),us(e))
    if e["event"]==12: pulled[c]=us(e)
    if e["event"]==2: ends[c]=us(e)
fc=sorted(first_claim.values())
print("first tile claimed: min %.1f median %.1f max %.1f"%(fc[0],st.median(fc),fc[-1]))
fr=sorted(first_ready.values())
print("first tile ready: min %.1f median %.1f max %.1f"%(fr[0],st.median(fr),fr[-1]))
pc=sorted(v for c,v in pulled.items() if c<ncomp)
if pc: print("compute CTAs' pull (help) ended: min %.1f median %.1f max %.1f"%(pc[0],st.median(pc),pc[-1]))
pp=sorted(v for c,v in pulled.items() if c>=ncomp)
print("pull CTAs ended pull: ", ["%.0f"%x for x in pp[:3]], "...", ["%.0f"%x for x in pp[-3:]])
# tiles in flight over time
claims.sort()
import collections
hist=collections.Counter(int(t//100) for t,c,a in claims)
print("claims per 100us:", [hist[i] for i in range(20)])
