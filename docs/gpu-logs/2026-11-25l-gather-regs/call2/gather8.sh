#!/usr/bin/env bash
# MoE gathered [K, N] at 56/224 registers vs 40/232: repeat, then ncu of both. Run from /tmp.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=.gpu/bin; M=$RR/.gpu-all/mods
C=8192x7168x2048x128x4,4096x7168x2048x128x8
for r in 1 2; do for v in cur r56; do
  n=m-$v-$r
  MKERNEL_MODULE=$M/$v.cubin timeout 150 $B/mkernel bench moe --world 1 --layouts kn --configs $C --gather --json $OUT/$n.jsonl > $OUT/$n.log 2>&1; echo "$n $?"
  grep -E "fused|alone" $OUT/$n.log | awk '{print $3, $6, $7, $8}'
done; done
N=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for v in cur r56; do
  MKERNEL_MODULE=$M/$v.cubin timeout 150 $N --set full -k regex:mk_moe_gather_kn --launch-skip 3 -c 1 $B/mkernel bench moe --world 1 --layouts kn --configs 8192x7168x2048x128x4 --gather --reps 2 --warmup 1 > $OUT/ncu-moe-$v.txt 2>&1; echo "ncu $v $?"
  grep -E "Duration|Compute \(SM\) Throughput|Spilling Requests |L1/TEX Hit|L2 Hit|Warp Cycles Per Issued|DRAM Through|Registers Per|Achieved Occ|Block Limit Reg" $OUT/ncu-moe-$v.txt
done
