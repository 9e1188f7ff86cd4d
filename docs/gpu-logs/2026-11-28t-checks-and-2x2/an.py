import re,sys,collections
f=sys.argv[1]
D=collections.defaultdict(list)
for l in open(f):
    m=re.match(r'\[rank (\d+)\] MKT (\d+) (\d+) (\d+) (\d+) (\d+) (\d+)',l)
    if not m: continue
    r,ep,what,cta,t,a,b=map(int,m.groups())
    D[(r,ep)].append((what,cta,t,a,b))
for (r,ep),xs in sorted(D.items()):
    t0=min(t for w,c,t,a,b in xs if w==1)
    ntiles=sum(1 for x in xs if x[0]==4)
    ends=[(t-t0,c) for w,c,t,a,b in xs if w==5]
    starts=[(t-t0,c) for w,c,t,a,b in xs if w==1]
    roles={c:a for w,c,t,a,b in xs if w==1}
    print(f"rank {r} epoch {ep}: stamps {len(xs)} tiles {ntiles} start spread {max(starts)[0]/1e3:.1f} us; end max {max(ends)[0]/1e3:.1f} us (cta {max(ends)[1]} role {roles.get(max(ends)[1])})")
    # end distribution by role
    for role in sorted(set(roles.values())):
        e=sorted(t for t,c in ends if roles.get(c)==role)
        if e: print(f"   role {role}: n {len(e)} end min {e[0]/1e3:.1f} med {e[len(e)//2]/1e3:.1f} max {e[-1]/1e3:.1f}")
    w7=[(t-t0,a) for w,c,t,a,b in xs if w==7]; w8=[(t-t0,a) for w,c,t,a,b in xs if w==8]
    print("   inter-send pushed all at", [round(t/1e3,1) for t,a in w7], "quiet done at", [round(t/1e3,1) for t,a in w8])
    fw=sorted((t-t0,a,b) for w,c,t,a,b in xs if w==6)
    if fw: print(f"   forward: {len(fw)} chunks seen, first {fw[0][0]/1e3:.1f} last {fw[-1][0]/1e3:.1f} us (src {fw[-1][1]} chunk {fw[-1][2]})")
    if ntiles:
        claims={ (c,a):t-t0 for w,c,t,a,b in xs if w==3}
        passes=[(t-t0,c,a,b) for w,c,t,a,b in xs if w==4]
        waits=[(tp-claims[(c,a)]) for tp,c,a,b in passes]
        print(f"   gate waits: total {sum(waits)/1e6:.3f} ms over CTAs; tiles waiting >5us: {sum(1 for w in waits if w>5000)}")
        passes.sort()
        last=passes[-20:]
        print("   last gate passes (us, cta, walk pos, m, n, waited us):", [(round(t/1e3,1),c,a,b>>16,b&0xffff, round((t-claims[(c,a)])/1e3,1)) for t,c,a,b in last[-8:]])
        # per CTA: last claim time and exit
        lastpass={}
        for t,c,a,b in passes: lastpass[c]=max(lastpass.get(c,0),t)
        e={c:t for t,c in ends}
        late=sorted(((e[c]-lastpass[c])/1e3, c, lastpass[c]/1e3, e[c]/1e3) for c in lastpass)
        print("   CTAs ending last: (end us, last pass us, cta)", sorted(((round(e[c]/1e3,1), round(lastpass[c]/1e3,1), c) for c in lastpass))[-6:])
        # wait histogram by time
        buckets=collections.Counter()
        for (tp,c,a,b),w in zip(sorted(passes), [0]*len(passes)): pass
        wt=collections.Counter()
        for tp,c,a,b in passes:
            w=tp-claims[(c,a)]
            wt[int((tp)/1e5)]+=w
        print("   wait (us summed over CTAs) per 100us of pass time:", {k*100:round(v/1e3) for k,v in sorted(wt.items())})
