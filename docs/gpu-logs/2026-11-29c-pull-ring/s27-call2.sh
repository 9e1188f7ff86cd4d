# Session 27, call 2 (1x H200, a8434c2 host): the pull CTAs' row stores from every thread's
# registers (`lsu-pull` experiment, 4 or 8 loads in flight a thread) against a8434c2's module
# (cur: TMA bulk stores through the ring) at world 1, DeepSeek-like E = 128 and E = 64, and
# gpu_moe on the lsu4 module.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_MODULE=$H/bin/lsu4.cubin MKERNEL_REQUIRE_GPU=1 timeout 200 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe-lsu4.log 2>&1; stamp "gpu_moe lsu4 rc=$?"
K="--world 1 --layouts kn --join true"
for r in 1 2; do
  for m in cur lsu4 lsu8; do
    for pr in "8 32" "16 32" "32 32"; do
      set -- $pr
      MKERNEL_MODULE=$H/bin/$m.cubin timeout 60 $H/bin/mkernel bench moe $K --configs 4096x7168x2048x128x8 --pull-ctas $1 --run-records $2 > $L/$m-e128-p$1-r$2-$r.log 2>&1; stamp "$m e128 p$1 r$2 round $r rc=$?"
    done
    MKERNEL_MODULE=$H/bin/$m.cubin timeout 60 $H/bin/mkernel bench moe $K --configs 4096x7168x2048x64x8 --pull-ctas 16 --run-records 8 > $L/$m-e64-p16-r8-$r.log 2>&1; stamp "$m e64 round $r rc=$?"
  done
done
pack
grep -h "test result" $L/t-*.log
python3 - <<'PY'
import glob,re,collections
d=collections.defaultdict(list)
for f in sorted(glob.glob("/tmp/logs/*.log")):
    n=f.split("/")[-1][:-6]
    for l in open(f):
        m=re.search(r"(mkernel-fused|gemm-alone|dispatch-alone)\s+([\d.]+)",l)
        if m: d[(n,m.group(1))].append(m.group(2))
for k in sorted(d): print("%-22s %-15s %s"%(k[0],k[1]," ".join(d[k])))
PY
