# Session 29, call 8 (1x H200): what the consumers' fence.proxy.async (each k-block, after a
# gathered stage lands) costs: HEAD against nofence.cubin (the fence left out: not correct in
# principle, timed only), gathered MoE at world 1 (E = 128, 64; [K, N]; 16 pull CTAs, joined) and
# bench gemm --gather, two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --layouts kn --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8 --join true --pull-ctas 16 --gather"
G="--gather --tile-n 256 --ring staged --split-k 1 --shapes 32768x2048x7168"
E=""
bb() { n=$1; shift; timeout 60 env $E $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
gg() { n=$1; shift; timeout 60 env $E $H/bin/mkernel bench gemm $G "$@" > $L/g-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  bb head-$r
  E="MKERNEL_MODULE=$H/bin/nofence.cubin" bb nofence-$r
  gg head-$r
  E="MKERNEL_MODULE=$H/bin/nofence.cubin" gg nofence-$r
done
pack
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/b-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-10s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
for f in $L/g-*.log; do echo "== $f"; grep -E "mkernel|gather" $f | grep -v plan | awk '{print $2,$4,$5,$6}'; done
