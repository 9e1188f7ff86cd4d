# Session 27, call 4 (1x H200): own rows in the GEMM's order in items of part of a tile row
# (MOE_OWN_ITEM_ROWS 32 in the binaries; own16/own64/own128.cubin the same code with 16, 64,
# 128): the new gpu_moe test with 32 and 16; world-1 bench, order off against on; a timeline.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 100 $H/bin/test-gpu_moe own_rows --test-threads 1 > $L/t-gpu_moe-own32.log 2>&1; stamp "gpu_moe own32 rc=$?"
MKERNEL_MODULE=$H/bin/own16.cubin MKERNEL_REQUIRE_GPU=1 timeout 100 $H/bin/test-gpu_moe own_rows --test-threads 1 > $L/t-gpu_moe-own16.log 2>&1; stamp "gpu_moe own16 rc=$?"
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --pull-ctas 16 --run-records 8"
for r in 1 2; do
  timeout 60 $H/bin/mkernel bench moe $K --expert-order false > $L/eo-off-$r.log 2>&1; stamp "off $r rc=$?"
  timeout 60 $H/bin/mkernel bench moe $K --expert-order true > $L/eo-own32-$r.log 2>&1; stamp "own32 $r rc=$?"
  for v in 16 64; do
    MKERNEL_MODULE=$H/bin/own$v.cubin timeout 60 $H/bin/mkernel bench moe $K --expert-order true > $L/eo-own$v-$r.log 2>&1; stamp "own$v $r rc=$?"
  done
done
timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 16 --run-records 8 --join true --expert-order true --trace $L/tl-own32 > $L/tl-own32.log 2>&1; stamp "trace rc=$?"
gzip -9 $L/tl-*.rank*.jsonl
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log | head
grep -v "^\[rank 0\] *$" $L/tl-own32.log | sed -n 2,12p
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/eo-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-12s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
