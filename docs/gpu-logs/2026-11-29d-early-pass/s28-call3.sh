# Session 28, call 3 (1x H200): the early pass with more pull CTAs (the later waves waited for the
# dispatch once the helpers stopped, call 1): side pull at 32 pull CTAs with early 0 / 1 / 2 waves,
# 16 without side or early, side at 8 with early 0; two rounds interleaved; timeline of side-e1-p32.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
bb() { n=$1; shift; timeout 60 $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  bb p16-$r --pull-ctas 16
  bb side-p8-$r --pull-ctas 8 --side-pull true
  bb side-p32-$r --pull-ctas 32 --side-pull true
  bb side-e1-p32-$r --pull-ctas 32 --side-pull true --early-waves 1
  bb side-e2-p32-$r --pull-ctas 32 --side-pull true --early-waves 2
  bb e1-p32-$r --pull-ctas 32 --early-waves 1
done
timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 32 --run-records 8 --join true --side-pull true --early-waves 1 --trace $L/tl-side-e1-p32 > $L/tl-side-e1-p32.log 2>&1; stamp "trace rc=$?"
gzip -9 $L/tl-*.rank*.jsonl
pack
grep -v "^\[rank 0\] *$" $L/tl-side-e1-p32.log | sed -n 2,12p
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
