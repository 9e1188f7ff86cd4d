# Session 27, call 3 (1x H200): own rows in the GEMM's order (`--expert-order`, MOE_EXPERT_ORDER):
# gpu_moe whole (the new own_rows_in_the_gemms_order among them), world-1 bench of the order
# on and off (E = 128 and E = 64 DeepSeek-like proxies), and timelines of the trace build.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --join true"
for r in 1 2; do
  for eo in false true; do
    for pr in "16 8" "8 32"; do
      set -- $pr
      timeout 60 $H/bin/mkernel bench moe $K --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --pull-ctas $1 --run-records $2 --expert-order $eo > $L/eo-$eo-p$1-r$2-$r.log 2>&1; stamp "eo $eo p$1 r$2 round $r rc=$?"
    done
  done
done
for eo in false true; do
  timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 16 --run-records 8 --join true --expert-order $eo --trace $L/tl-eo-$eo > $L/tl-eo-$eo.log 2>&1; stamp "trace eo $eo rc=$?"
done
gzip -9 $L/tl-*.rank*.jsonl
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log | head
for eo in false true; do grep -v "^\[rank 0\] *$" $L/tl-eo-$eo.log | sed -n 2,12p; done
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/eo-*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"T4096xH7168xI2048xE(\d+)xk8.*(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,"E"+m.group(1),m.group(2))].append(m.group(3))
for k in sorted(d): print("%-18s %-5s %-15s %s"%(k[0],k[1],k[2]," ".join(d[k])))
PY
