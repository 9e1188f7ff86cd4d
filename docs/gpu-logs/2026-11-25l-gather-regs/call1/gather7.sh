#!/usr/bin/env bash
# The gathered producer at 56 registers (consumers 224): tests, GEMM and MoE A/B against the
# committed module, ncu of the new one. Run from /tmp with OUT and RR set.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
B=.gpu/bin; M=$RR/.gpu-all/mods
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
for t in gpu_gemm_gather gpu_moe; do
  MKERNEL_REQUIRE_GPU=1 timeout 240 $B/test-$t > $OUT/test-$t.log 2>&1; echo "test $t rc $?"; grep -E "test result|panicked" $OUT/test-$t.log | head -3
done
for r in 1 2; do for v in cur r56; do
  MKERNEL_MODULE=$M/$v.cubin timeout 150 $B/mkernel bench gemm --gather --layouts kn,nk --shapes 32768x2048x7168,16384x4096x8192,8192x8192x8192 --json $OUT/g-$v-$r.jsonl > $OUT/g-$v-$r.log 2>&1; echo "gemm $v round $r rc $?"
  grep -E "^gemm" $OUT/g-$v-$r.log | grep -v cublas | awk '{print $2, $4, $5, $6, $9}'
done; done
C=8192x7168x2048x128x4,4096x7168x2048x128x8,8192x4096x14336x4x2
for v in cur r56; do for g in "" "--gather"; do
  n=m-$v${g:+-gather}
  MKERNEL_MODULE=$M/$v.cubin timeout 150 $B/mkernel bench moe --world 1 --layouts kn,nk --configs $C $g --json $OUT/$n.jsonl > $OUT/$n.log 2>&1; echo "$n $?"
done; done
python3 - <<'PY'
import json,glob,os
out=os.environ["OUT"]
for f in sorted(glob.glob(out+"/m-*.jsonl")):
    recs=[json.loads(l) for l in open(f) if l.startswith("{")]
    by={}
    for r in recs: by.setdefault((r["shape"],r["layout"]),{})[r["impl"]]=r
    for (s,l),v in by.items():
        x=v["mkernel-fused"]
        print(f'{os.path.basename(f)[:-6]:14} {s[:22]:22} {l} fused {v["mkernel-fused"]["ms"]:.3f} unf {v["mkernel-unfused"]["ms"]:.3f} gemm {v["gemm-alone"]["ms"]:.3f} disp {v["dispatch-alone"]["ms"]:.3f} ratio {x.get("fused_over_ideal",0):.3f}')
PY
N=$(ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for l in kn nk; do
  MKERNEL_MODULE=$M/r56.cubin timeout 150 $N --set full -k regex:mk_gemm_gather -c 1 $B/mkernel bench gemm --gather --layouts $l --shapes 8192x8192x8192 --reps 1 --warmup 0 > $OUT/ncu-$l.txt 2>&1; echo "ncu $l $?"
  grep -E "Duration|Compute \(SM\) Throughput|Spilling|L1/TEX Hit|Warp Cycles Per Issued" $OUT/ncu-$l.txt
done
