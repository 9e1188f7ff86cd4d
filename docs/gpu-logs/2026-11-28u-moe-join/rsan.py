import json,gzip,collections,statistics as st,sys
f=sys.argv[1]
S=[json.loads(l) for l in gzip.open(f,'rt')]
t0=min(s['t_ns'] for s in S if s['event']==1)
us=lambda t:(t-t0)/1e3
own=set(s['a'] for s in S if s['event']==13)
sent=set(s['a'] for s in S if s['event']==16)
claims=collections.defaultdict(list)
for s in S:
    if s['event']==3: claims[s['cta']].append((s['t_ns'],s['a']))
ends={s['cta']:s['t_ns'] for s in S if s['event']==2}
per=[]  # (kind, start_us, dur)
for c,l in claims.items():
    l.sort()
    for i,(t,a) in enumerate(l):
        nxt = l[i+1][0] if i+1<len(l) else None
        if nxt is None: continue
        per.append(('own' if a in own else 'send' if a in sent else '?', us(t), (nxt-t)/1e3, i))
for k in ('send','own'):
    d=[p[2] for p in per if p[0]==k]
    if d: print(k, len(d), 'median %.1f mean %.1f p90 %.1f'%(st.median(d), st.mean(d), sorted(d)[len(d)*9//10]))
# by time window
for lo in range(0,500,50):
    d=[p for p in per if lo<=p[1]<lo+50]
    if d: print('window %3d-%3d us: %4d tiles, mean %.1f us, own %d'%(lo,lo+50,len(d),st.mean(p[2] for p in d), sum(p[0]=='own' for p in d)))
# by index within CTA
byi=collections.defaultdict(list)
for p in per: byi[p[3]].append(p[2])
print('by position in CTA:', ' '.join('%d:%.1f'%(i,st.mean(v)) for i,v in sorted(byi.items())))
first=[l[0][0] for l in claims.values()]
print('first claims: %.1f..%.1f us'%(us(min(first)),us(max(first))))
print('ends median %.1f'%st.median(us(t) for t in ends.values()))
# sum per CTA of SUM_WAITED
for ev,name in ((16,'partial_sent'),(13,'sum_waited'),(15,'partials_waited'),(14,'stage_waited')):
    d=[(us(s['t_ns']),s['b']/1e3) for s in S if s['event']==ev]
    if not d: continue
    out=[]
    for lo in range(0,500,50):
        w=[x[1] for x in d if lo<=x[0]<lo+50]
        if w: out.append('%d:%d/%.1f'%(lo,len(w),st.mean(w)))
    print(name, ' '.join(out))
