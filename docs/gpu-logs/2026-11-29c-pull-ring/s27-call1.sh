# Session 27, call 1 (1x H200, a8434c2 host): the pull ring's loads in flight (BULK_AHEAD 4/6/8/10
# of 12 stages, module files built from a8434c2 with only that constant changed; cur = 6) at
# world 1 on the world-2 DeepSeek-like proxy, three (pull CTAs, runs) settings, two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
K="--world 1 --configs 4096x7168x2048x128x8 --layouts kn --join true"
for r in 1 2; do
  for m in cur ahead4 ahead8 ahead10; do
    for pr in "8 32" "16 8" "16 32" "32 32"; do
      set -- $pr
      MKERNEL_MODULE=$H/bin/$m.cubin timeout 60 $H/bin/mkernel bench moe $K --pull-ctas $1 --run-records $2 > $L/$m-p$1-r$2-$r.log 2>&1; stamp "$m p$1 r$2 round $r rc=$?"
    done
  done
done
pack
cat $L/stamps.txt | tail -3
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
