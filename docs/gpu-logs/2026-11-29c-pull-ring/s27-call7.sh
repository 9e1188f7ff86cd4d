# Session 27, call 7 (1x H200): pull CTAs no longer wait for every item before joining the tiles (only the last
# one out, before `done`): gpu_moe whole; world-1 bench off at 16 and side at 16 and 8.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
for r in 1 2; do
  timeout 60 $H/bin/mkernel bench moe $K --pull-ctas 16 --side-pull false > $L/b-off-p16-$r.log 2>&1; stamp "off p16 $r rc=$?"
  timeout 60 $H/bin/mkernel bench moe $K --pull-ctas 8 --side-pull true > $L/b-side-p8-$r.log 2>&1; stamp "side p8 $r rc=$?"
  timeout 60 $H/bin/mkernel bench moe $K --pull-ctas 16 --side-pull true > $L/b-side-p16-$r.log 2>&1; stamp "side p16 $r rc=$?"
done
pack
grep -h "test result\|FAILED\|panicked\|skipped" $L/t-*.log | head
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
