#!/usr/bin/env bash
# Every MoE launch of one bench iteration under ncu (no clock or cache control), cur vs r56,
# gathered [K, N], DeepSeek-like proxy; laid-out for reference. Run from /tmp.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=.gpu/bin; M=$RR/.gpu-all/mods
N=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
MET=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,lts__t_sector_hit_rate.pct,lts__t_sectors_srcunit_tex_op_read.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,l1tex__t_requests_pipe_lsu_mem_local_op_ld.sum
for v in cur r56; do for g in --gather ""; do
  n=ncu-$v${g:+-g}
  MKERNEL_MODULE=$M/$v.cubin timeout 200 $N --clock-control none --cache-control none --metrics $MET -k regex:mk_moe -c 14 $B/mkernel bench moe --world 1 --layouts kn --configs 8192x7168x2048x128x4 $g --reps 2 --warmup 1 > $OUT/$n.txt 2>&1; echo "$n $?"
  python3 - $OUT/$n.txt <<'PY'
import sys,re
cur=None
for l in open(sys.argv[1]):
    m=re.match(r"\s+(mk_\w+) \((\d+), 1, 1\)", l)
    if m: cur=[m.group(1), m.group(2)]; continue
    m=re.match(r"\s+(\S+)\s+(\S+)\s+([\d,.]+)\s*$", l)
    if cur is not None and m:
        cur.append(m.group(1).split("__")[1][:14]+"="+m.group(3)+m.group(2)[:6])
        if len(cur)==9: print(" ".join(cur)); cur=None
PY
done; done
