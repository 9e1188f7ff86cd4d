# Session 27, call 5 (1x H200): the spare warps move rows (`--side-pull`, MOE_SIDE_PULL; 4
# vectors in flight a thread in the binaries, side2.cubin 2): gpu_moe whole (the new
# spare_warps_move_rows among them); world-1 bench off / on at 16, 8 and 4 pull CTAs; timeline.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
K="--world 1 --layouts kn --join true --configs 4096x7168x2048x128x8,4096x7168x2048x64x8 --run-records 8"
for r in 1 2; do
  timeout 60 $H/bin/mkernel bench moe $K --pull-ctas 16 --side-pull false > $L/b-off-p16-$r.log 2>&1; stamp "off p16 $r rc=$?"
  for pc in 16 8 4; do
    timeout 60 $H/bin/mkernel bench moe $K --pull-ctas $pc --side-pull true > $L/b-side4-p$pc-$r.log 2>&1; stamp "side4 p$pc $r rc=$?"
  done
  MKERNEL_MODULE=$H/bin/side2.cubin timeout 60 $H/bin/mkernel bench moe $K --pull-ctas 8 --side-pull true > $L/b-side2-p8-$r.log 2>&1; stamp "side2 p8 $r rc=$?"
done
for pc in 16 8; do
  timeout 60 $H/bin/mkernel-trace bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas $pc --run-records 8 --join true --side-pull true --trace $L/tl-side-p$pc > $L/tl-side-p$pc.log 2>&1; stamp "trace p$pc rc=$?"
done
gzip -9 $L/tl-*.rank*.jsonl
pack
grep -h "test result\|FAILED\|panicked" $L/t-*.log | head
for pc in 16 8; do grep -v "^\[rank 0\] *$" $L/tl-side-p$pc.log | sed -n 2,12p; done
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
