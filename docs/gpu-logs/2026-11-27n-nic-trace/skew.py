import glob,sys,statistics as st
def bursts(f):
    ev=[l.split(',') for l in open(f).read().split('\n') if l]
    out=[];cur=None;last=None
    for e in ev:
        if e[0]=='P':
            op=int(e[3])
            if op==2 and last!=2:
                cur={'s':int(e[1]),'sg':int(e[2]),'w':None,'e':None,'n':0,'fl':0};out.append(cur)
            if op==1:
                cur['n']+=1; cur['fl']+=int(e[7])
                if cur['w'] is None: cur['w']=int(e[1])
            last=op
        elif cur is not None:
            cur['e']=int(e[1])
    return out
d=sys.argv[1]
fs=sorted(glob.glob(d+'/nic-*.csv'), key=lambda f:int(f.split('-')[-2]))
B=[bursts(f) for f in fs]
n=min(len(b) for b in B)
print(d, [len(b) for b in B])
# per burst: start spread across ranks (first SIGNAL host time), end: last flag each rank's NIC raised
kinds={}
for i in range(n):
    k=(B[0][i]['n'],B[0][i]['fl'])
    s=[b[i]['s'] for b in B]; e=[b[i]['e'] for b in B]; w=[b[i]['w'] for b in B]
    kinds.setdefault(k,[]).append(((max(s)-min(s))/1e3, (max(e)-min(s))/1e3, (min(w)-min(s))/1e3, (max(w)-min(s))/1e3))
for k,v in kinds.items():
    v=v[3:]
    if not v: continue
    print(' writes %d flagged %d: n=%d  start skew med %.1f max %.1f | first SIGNAL(any) -> last flag(any) med %.1f | ->first write min/max med %.1f / %.1f' % (k[0],k[1],len(v), st.median(x[0] for x in v), max(x[0] for x in v), st.median(x[1] for x in v), st.median(x[2] for x in v), st.median(x[3] for x in v)))
