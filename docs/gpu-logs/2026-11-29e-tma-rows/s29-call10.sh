# Session 29, call 10 (1x H200): the gathered MoE on the deep ring (4 stages, stores from
# registers) instead of the staged one (3 stages, TMA stores): gpu_moe whole; bench moe world 1
# (E = 128, 64; [K, N]): laid out (side pull, 8 pull CTAs) and gathered (16 pull CTAs, joined),
# two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8 --join true"
bb() { n=$1; shift; timeout 60 $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  bb laid-$r --pull-ctas 8 --side-pull true
  bb gath-$r --pull-ctas 16 --gather
done
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log | head
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/b-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-8s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
