# Summarise `bench allgather` runs: files {tag}-{rep}.jsonl under DIR (tag e.g. ag-w4-ce):
# GB/s per GPU (bus bandwidth) per (tag, impl, bytes), one value per rep.
import json, glob, sys, collections
rows = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/ag-*.jsonl')):
    tag = f.split('/')[-1][:-6].rsplit('-', 1)[0]
    for l in open(f):
        r = json.loads(l)
        rows[(tag, r['impl'], int(r['shape']))].append(round(r['gbps'], 1))
for (tag, imp, size), v in sorted(rows.items(), key=lambda kv: (kv[0][2], kv[0][0], kv[0][1])):
    print(f"{size >> 20:>5} MiB  {tag:<14} {imp:<30} {v}")
