# Session 29, call 4 (1x H200): the gathered producer's row loads further ahead of the consumers:
# HEAD (7e4fcce + 56-register MoE gather producer) against l2hint.cubin (cp.async ... L2::256B:
# L2 fetches 256 bytes, the next k-block of a row with it) and pf2.cubin (prefetch.global.L2 of
# each thread's row piece two k-blocks ahead). bench moe world 1 (E = 128, 64; [K, N]; gathered,
# 16 pull CTAs, joined; laid out as reference) and bench gemm --gather, two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --layouts kn --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8 --join true"
G="--gather --tile-n 256 --ring staged --split-k 1 --shapes 32768x2048x7168,16384x4096x8192"
E=""
bb() { n=$1; shift; timeout 60 env $E $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
gg() { n=$1; shift; timeout 60 env $E $H/bin/mkernel bench gemm $G "$@" > $L/g-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  bb laid-$r --pull-ctas 8 --side-pull true
  bb head-$r --pull-ctas 16 --gather
  E="MKERNEL_MODULE=$H/bin/l2hint.cubin" bb l2hint-$r --pull-ctas 16 --gather
  E="MKERNEL_MODULE=$H/bin/pf2.cubin" bb pf2-$r --pull-ctas 16 --gather
done
gg head
E="MKERNEL_MODULE=$H/bin/l2hint.cubin" gg l2hint
E="MKERNEL_MODULE=$H/bin/pf2.cubin" gg pf2
pack
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/b-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-10s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
for f in $L/g-*.log; do echo "== $f"; grep -E "mkernel|cublas|gather" $f | grep -v plan | awk '{print $2,$4,$5,$6}'; done
