#!/usr/bin/env bash
# Is the two-speed shape a clock effect? SM clock and power sampled every 50 ms while our bench runs
# 4x16x8192x128 full in 6 processes, then cuDNN in 3. Run from /tmp with OUT set.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,temperature.gpu,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > $OUT/smi.csv 2>&1 &
smi=$!
cat > /tmp/cudnn1.py <<'PY'
import torch, torch.nn.functional as F, time, sys
from torch.nn.attention import sdpa_kernel, SDPBackend
q = torch.randn(4,16,8192,128, device="cuda", dtype=torch.bfloat16); k = torch.randn_like(q); v = torch.randn_like(q)
with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
    for _ in range(5): F.scaled_dot_product_attention(q, k, v)
    torch.cuda.synchronize(); ts=[]
    for _ in range(20):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record(); F.scaled_dot_product_attention(q, k, v); e.record(); torch.cuda.synchronize(); ts.append(s.elapsed_time(e))
ts.sort(); t = ts[10]
print(f"{time.time():.3f} cudnn {4*4*16*8192*8192*128/t/1e9:.1f} TFLOP/s (min {4*4*16*8192*8192*128/ts[0]/1e9:.1f} max {4*4*16*8192*8192*128/ts[-1]/1e9:.1f})", flush=True)
PY
for i in 1 2 3 4 5 6; do
  echo "$(date +%s.%N | cut -c1-14) mkernel start $i"
  .gpu/bin/mkernel bench attention --configs 4x16x8192x128 --masks full --reps 40 2>/dev/null | grep attention | grep -v "forward"
  echo "$(date +%s.%N | cut -c1-14) mkernel end $i"
done
for i in 1 2 3; do echo "$(date +%s.%N | cut -c1-14) cudnn start $i"; python3 /tmp/cudnn1.py; done
kill $smi
