# Session 28, call 1 (1x H200): the early pass (`--early-waves` / `--early-tiles`, MoeParams::early_tiles):
# gpu_moe whole (first_waves_rows_first new); world-1 bench, two rounds: off at 16 pull CTAs, side pull at 8,
# early 1 wave at 16, side + early 1 / 2 waves at 8; timelines of side at 8 with and without early 1.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
bb() { n=$1; shift; timeout 60 $H/bin/mkernel bench moe $K "$@" > $L/b-$n.log 2>&1; stamp "$n rc=$?"; }
for r in 1 2; do
  bb off-p16-$r --pull-ctas 16
  bb side-p8-$r --pull-ctas 8 --side-pull true
  bb e1-p16-$r --pull-ctas 16 --early-waves 1
  bb side-e1-p8-$r --pull-ctas 8 --side-pull true --early-waves 1
  bb side-e2-p8-$r --pull-ctas 8 --side-pull true --early-waves 2
done
for v in "side-p8:" "side-e1-p8:--early-waves 1"; do
  n=${v%%:*}; a=${v#*:}
  timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 8 --run-records 8 --join true --side-pull true $a --trace $L/tl-$n > $L/tl-$n.log 2>&1; stamp "trace $n rc=$?"
done
gzip -9 $L/tl-*.rank*.jsonl
pack
grep -h "test result\|FAILED\|panicked\|early pass" $L/t-*.log | sort | uniq -c | head -30
for n in side-p8 side-e1-p8; do grep -v "^\[rank 0\] *$" $L/tl-$n.log | sed -n 2,12p; done
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
