# Session 26, call 2 (1x H200): why short tiles gave nothing. (1) a config whose experts hold about 64
# rows each (half the tiles short), new against HEAD's module; (2) Nsight Compute's speed-of-light
# on the grouped GEMM at the world-2 DeepSeek-like proxy (E=128, ~256 rows an expert), both modules.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
C=2048x7168x2048x128x4,4096x7168x2048x128x8
for r in 1 2; do
  timeout 100 $H/bin/mkernel bench moe --world 1 --configs $C --layouts kn,nk > $L/moe-new-$r.log 2>&1; stamp "moe new $r rc=$?"
  MKERNEL_MODULE=$H/bin/head.cubin timeout 100 $H/bin/mkernel bench moe --world 1 --configs $C --layouts kn,nk > $L/moe-old-$r.log 2>&1; stamp "moe old $r rc=$?"
done
NCU="ncu --target-processes all --clock-control none -k regex:mk_moe_kn -c 6 --section SpeedOfLight --metrics gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes_read.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active"
timeout 150 $NCU $H/bin/mkernel bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --reps 1 --warmup 0 > $L/ncu-new.log 2>&1; stamp "ncu new rc=$?"
MKERNEL_MODULE=$H/bin/head.cubin timeout 150 $NCU $H/bin/mkernel bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --reps 1 --warmup 0 > $L/ncu-old.log 2>&1; stamp "ncu old rc=$?"
pack
cat $L/stamps.txt
for f in $L/moe-*.log; do echo "== $(basename $f)"; grep "gemm-alone\|fused" $f; done
for f in $L/ncu-*.log; do echo "== $(basename $f)"; grep -E "mk_moe_kn|Duration|Throughput|lts__t_bytes|dram__bytes|gmma|==ERR|error" $f | head -80; done
