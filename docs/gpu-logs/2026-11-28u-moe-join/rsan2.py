import json,gzip,collections,statistics as st,sys
S=[json.loads(l) for l in gzip.open(sys.argv[1],'rt')]
t0=min(s['t_ns'] for s in S if s['event']==1)
own=set(s['a'] for s in S if s['event']==13)
claims=collections.defaultdict(list)
for s in S:
    if s['event']==3: claims[s['cta']].append((s['t_ns'],s['a']))
g=collections.defaultdict(list)
for c,l in claims.items():
    l.sort()
    if len(l)<4: continue
    k='own0' if l[0][1] in own else 'send0'
    g[k].append(((l[2][0]-l[1][0])/1e3, (l[1][0]-l[0][0])/1e3, (l[3][0]-l[2][0])/1e3, (l[0][0]-t0)/1e3))
for k,v in g.items():
    print(k, len(v), 'pos0 %.1f pos1 %.1f pos2 %.1f firstclaim %.1f'%(st.mean(x[1] for x in v), st.mean(x[0] for x in v), st.mean(x[2] for x in v), st.mean(x[3] for x in v)))
# first sends: completion time distribution
ps=sorted(((s['t_ns']-t0)/1e3, s['b']/1e3) for s in S if s['event']==16)[:264]
print('first 264 sends end %.1f..%.1f us, durations mean %.1f max %.1f'%(ps[0][0], ps[-1][0], st.mean(x[1] for x in ps), max(x[1] for x in ps)))
