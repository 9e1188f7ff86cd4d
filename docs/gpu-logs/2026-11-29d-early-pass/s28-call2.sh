# Session 28, call 2 (1x H200): everything first? More pull CTAs joining the tiles at world 1
# (16, 32, 64, 96, 124 pull CTAs, runs of 8, join, no side pull; 32 and 64 with the side pull too),
# two rounds; dispatch alone at each count is the whole GPU's copy rate; timelines at 64 and 124.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
bb() { n=$1; shift; timeout 60 $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  for pc in 16 32 64 96 124; do bb p$pc-$r --pull-ctas $pc; done
  bb side-p32-$r --pull-ctas 32 --side-pull true
  bb side-p64-$r --pull-ctas 64 --side-pull true
done
for pc in 64 124; do
  timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas $pc --run-records 8 --join true --trace $L/tl-p$pc > $L/tl-p$pc.log 2>&1; stamp "trace p$pc rc=$?"
done
gzip -9 $L/tl-*.rank*.jsonl
pack
for pc in 64 124; do grep -v "^\[rank 0\] *$" $L/tl-p$pc.log | sed -n 2,12p; done
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/b-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-14s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
