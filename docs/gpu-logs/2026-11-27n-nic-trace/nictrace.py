"""Summarise the traced emulated NIC (mkernel-trace, MK_NIC_TRACE): per launch burst, when the
first WRITE left after the ready SIGNAL, how long the wire was idle while posts were late, and
the span from the first WRITE to the last flag raised against the modelled wire (50 GB/s)."""
import glob, os, statistics as st, sys, collections
root = sys.argv[1]
for d in sorted(glob.glob(root + '/tr-*')):
    print('==', os.path.basename(d))
    for f in sorted(glob.glob(d + '/nic-*.csv')):
        ev = [l.split(',') for l in open(f).read().split('\n') if l]
        P = [(int(e[1]), int(e[2]), int(e[3]), int(e[4]), int(e[5]), int(e[6]), int(e[7])) for e in ev if e[0] == 'P']
        if not P:
            continue
        off = min(h - g for h, g, *_ in P)
        bursts, cur, last_op = [], None, None
        for e in ev:
            if e[0] == 'P':
                h, g, op, by, dst, idle, fl = map(int, e[1:])
                if op == 2 and last_op != 2:
                    cur = {'P': [], 'F': []}
                    bursts.append(cur)
                if cur is None:
                    cur = {'P': [], 'F': []}; bursts.append(cur)
                cur['P'].append((h, g, op, by, dst, idle, fl)); last_op = op
            elif cur is not None:
                cur['F'].append((int(e[1]), int(e[2])))
        rows = []
        for b in bursts:
            W = [p for p in b['P'] if p[2] == 1]
            if not W or not b['F']:
                continue
            h0 = b['P'][0][0]; w0 = W[0][0]
            by = sum(p[3] for p in W)
            ideal = by / 50e9 * 1e9
            idle = sum(max(p[5], 0) for p in W[1:])
            end = b['F'][-1][0]
            late = max(x[1] for x in b['F'])
            pick = [h - g - off for h, g, *_ in W]
            kind = 'chunked' if all(p[6] for p in W) else 'one-flag'
            rows.append((kind, len(W), by, (w0 - h0) / 1e3, (W[0][1] - b['P'][0][1]) / 1e3, idle / 1e3,
                         (end - w0) / 1e3, ideal / 1e3, (end - w0 - ideal) / 1e3, late / 1e3, st.median(pick) / 1e3, max(pick) / 1e3,
                         (W[-1][0] - w0) / 1e3))
        print(' ', os.path.basename(f), 'bursts', len(rows))
        print('    kind      writes  MiB  sig->1stW(host) (gpu)  wire-idle  span  ideal  excess  maxlate  pick-med pick-max  lastpost')
        by_kind = collections.defaultdict(list)
        for r in rows[-16:]:
            print('    %-8s %5d %6.1f %8.1f %8.1f %8.1f %8.1f %7.1f %7.1f %7.1f %7.1f %7.1f %7.1f' % (r[0], r[1], r[2] / 2**20, *r[3:]))
        for r in rows[5:]:
            by_kind[(r[0], r[1])].append(r)
        for k, rs in by_kind.items():
            med = lambda i: st.median(x[i] for x in rs)
            print('    median %s x%d (%d bursts): sig->1stW %.1f us, idle %.1f, span %.1f, ideal %.1f, excess %.1f, maxlate %.1f, pick %.1f' % (
                k[0], k[1], len(rs), med(3), med(5), med(6), med(7), med(8), med(9), med(10)))
