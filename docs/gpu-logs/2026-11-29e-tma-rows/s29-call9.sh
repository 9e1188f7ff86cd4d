# Session 29, call 9 (1x H200): where the gathered MoE GEMM's warps stall: Nsight Compute's warp
# state sampling per SASS instruction (SourceCounters) on one GEMM-alone launch of
# mk_moe_gather_kn and of mk_moe_kn (world 1, E = 128, [K, N]); the 40 instructions with the
# most samples of each.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for k in mk_moe_kn mk_moe_gather_kn; do
  g=""; [ $k = mk_moe_gather_kn ] && g="--gather"
  # Launches in order: fused x2, dispatch alone, GEMM alone (call 3): profile the fourth.
  timeout 200 ncu --target-processes all --clock-control none -k regex:$k --launch-skip 3 -c 1 --section SourceCounters --section WarpStateStats -o $L/src-$k \
    $H/bin/mkernel bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 16 --join true $g --reps 1 --warmup 0 > $L/ncu-$k.log 2>&1; stamp "ncu $k rc=$?"
  timeout 100 ncu --import $L/src-$k.ncu-rep --page source --csv --print-source sass > $L/sass-$k.csv 2> $L/sass-$k.err; stamp "export $k rc=$?"
done
python3 - <<'PY' > /tmp/logs/top.txt 2>&1
import csv,glob
for f in sorted(glob.glob("/tmp/logs/sass-*.csv")):
    rows=list(csv.reader(open(f)))
    hdr=None
    for i,r in enumerate(rows):
        if any("Warp Stall Sampling (All Samples)" in c for c in r) or any(c.strip()=="Source" for c in r):
            hdr=i; break
    if hdr is None: print(f,"no header; first rows:",rows[:3]); continue
    h=rows[hdr]; data=rows[hdr+1:]
    si=[j for j,c in enumerate(h) if "Warp Stall Sampling (All Samples)" in c]
    src=[j for j,c in enumerate(h) if c.strip()=="Source"]
    addr=[j for j,c in enumerate(h) if "Address" in c]
    print("==",f,"columns:",len(h),"stall col",si[:1],"total rows",len(data))
    if not si: print(h); continue
    def num(x):
        try: return float(x.replace(",",""))
        except: return 0.0
    tot=sum(num(r[si[0]]) for r in data if len(r)>si[0])
    top=sorted((r for r in data if len(r)>si[0]), key=lambda r:-num(r[si[0]]))[:40]
    for r in top:
        print("%8.0f %5.1f%%  %s  %s"%(num(r[si[0]]),100*num(r[si[0]])/max(tot,1),(r[addr[0]] if addr else ""),(r[src[0]] if src else "")[:90]))
PY
pack
cat $L/top.txt | head -100
