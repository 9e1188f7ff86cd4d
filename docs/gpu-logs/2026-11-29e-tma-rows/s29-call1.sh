# Session 29, call 1 (1x H200): A's rows loaded by one-row TMA boxes (InputGate::TMA_ROWS).
# gpu_gemm_gather (both producers, bit-exact against the plain GEMM) and gpu_moe (gather now
# TMA rows, with join and the side pull); bench gemm --gather (laid out / cuBLAS / TMA rows /
# cp.async) with 4 row warps (built in), 1 and 2 (module files); bench moe world 1: laid out
# vs gathered, E = 128 and 64 proxies, two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 100 $H/bin/test-gpu_gemm_gather --test-threads 1 > $L/t-gpu_gemm_gather.log 2>&1; stamp "gpu_gemm_gather rc=$?"
G="--gather --tile-n 256 --ring staged --split-k 1 --shapes 8192x8192x8192,32768x2048x7168,16384x4096x8192"
timeout 120 $H/bin/mkernel bench gemm $G > $L/g-w4.log 2>&1; stamp "gemm w4 rc=$?"
for w in 1 2; do
  MKERNEL_MODULE=$H/bin/rows$w.cubin timeout 120 $H/bin/mkernel bench gemm $G > $L/g-w$w.log 2>&1; stamp "gemm w$w rc=$?"
done
MKERNEL_REQUIRE_GPU=1 timeout 200 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
bb() { n=$1; shift; timeout 60 $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  bb laid-side-p8-$r --pull-ctas 8 --side-pull true
  bb gath-side-p8-$r --pull-ctas 8 --side-pull true --gather
  bb gath-p16-$r --pull-ctas 16 --gather
done
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log | sort | uniq -c | head -30
for f in $L/g-w*.log; do echo "== $f"; grep -E "mkernel|cublas|gather" $f | grep -v plan; done
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
