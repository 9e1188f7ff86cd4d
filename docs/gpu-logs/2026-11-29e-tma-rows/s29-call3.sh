# Session 29, call 3 (1x H200): why the gathered MoE GEMM is 26-37% slower than the laid-out one
# (world 1, E = 128, [K, N]): Nsight Compute on one launch of each mode of mk_moe_kn and
# mk_moe_gather_kn (kernel replay), speed of light, memory and warp-state sections.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M="gpu__time_duration.sum,lts__t_bytes.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sectors_srcunit_tex_op_read.sum,lts__t_sectors_srcunit_tex_op_read_lookup_hit.sum,lts__t_sector_hit_rate.pct,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,smsp__inst_executed.sum"
for k in mk_moe_kn mk_moe_gather_kn; do
  g=""; [ $k = mk_moe_gather_kn ] && g="--gather"
  timeout 200 ncu --target-processes all --clock-control none -k regex:$k -c 4 --section SpeedOfLight --section WarpStateStats --section MemoryWorkloadAnalysis --metrics $M \
    $H/bin/mkernel bench moe --world 1 --configs 4096x7168x2048x128x8 --layouts kn --pull-ctas 16 --join true $g --reps 1 --warmup 0 > $L/ncu-$k.log 2>&1; stamp "ncu $k rc=$?"
done
pack
for f in $L/ncu-*.log; do echo "== $(basename $f)"; grep -E "mk_moe|Duration|gpu__time|lts__t_bytes|dram__bytes|lts__t_sector|gmma|lsu_wavefronts|inst_executed|Stall|Warp Cycles|L2 Hit|Mem.*Throughput|==ERR|rror" $f | head -70; done
