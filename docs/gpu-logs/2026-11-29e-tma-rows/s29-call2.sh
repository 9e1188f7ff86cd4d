# Session 29, call 2 (1x H200): the gathering producer (cp.async) on dynamic walks: thread 0 draws,
# warps 1-3 read the ring; the MoE's gathered form now joins (pull CTAs draw tiles too).
# gpu_moe whole; bench moe world 1, E = 128 and 64 proxies, two rounds: laid out (side pull, 8
# pull CTAs), gathered + join at 16 and 8 pull CTAs, gathered static (no join), gathered with a
# 56-register producer (wide.cubin).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 200 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
bb() { n=$1; shift; timeout 60 env $E $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
E=""
for r in 1 2; do
  bb laid-side-p8-$r --pull-ctas 8 --side-pull true --join true
  bb gath-p16-$r --pull-ctas 16 --gather --join true
  bb gath-p8-$r --pull-ctas 8 --gather --join true
  bb gath-static-p16-$r --pull-ctas 16 --gather --no-join
  E="MKERNEL_MODULE=$H/bin/wide.cubin" bb gath-wide-p16-$r --pull-ctas 16 --gather --join true; E=""
done
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log | sort | uniq -c | head -30
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/b-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-16s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
