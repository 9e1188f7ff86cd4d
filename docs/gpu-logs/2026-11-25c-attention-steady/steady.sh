#!/usr/bin/env bash
# Steady-state attention timings: ours and cuDNN's each with 50 warm-up launches and 200 timed ones
# (each bracketed by CUDA events after a sync, as torch_baselines.py's timed()), past the clock
# transient at the start of a burst. Run from /tmp with OUT set.
set -u
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=timestamp,clocks.sm,clocks_throttle_reasons.active --format=csv,noheader -lms 50 > $OUT/smi.csv 2>&1 &
smi=$!
cat > /tmp/cudnn_steady.py <<'PY'
import torch, torch.nn.functional as F, json, sys
from torch.nn.attention import sdpa_kernel, SDPBackend
out = open(sys.argv[1], "w")
for (b, h, s, d) in [(4, 16, 8192, 128), (1, 16, 32768, 128), (4, 32, 8192, 64)]:
    q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16); k = torch.randn_like(q); v = torch.randn_like(q)
    for causal in (False, True):
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            for _ in range(50): F.scaled_dot_product_attention(q, k, v, is_causal=causal)
            torch.cuda.synchronize(); ts = []
            for _ in range(200):
                e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                e0.record(); F.scaled_dot_product_attention(q, k, v, is_causal=causal); e1.record(); torch.cuda.synchronize()
                ts.append(e0.elapsed_time(e1))
        ts.sort(); flop = 4 * b * h * s * s * d / (2 if causal else 1)
        r = dict(shape=f"{b}x{h}x{s}x{d}", causal=causal, impl="cudnn", ms=ts[100], tflops=flop / ts[100] / 1e9,
                 tflops_best=flop / ts[0] / 1e9, tflops_worst=flop / ts[-1] / 1e9)
        print(json.dumps(r), file=out, flush=True)
PY
for i in 1 2; do
  timeout 100 .gpu/bin/mkernel bench attention --warmup 50 --reps 200 --json $OUT/steady-mk-$i.jsonl > $OUT/steady-mk-$i.log 2>&1
  timeout 200 python3 /tmp/cudnn_steady.py $OUT/steady-cudnn-$i.jsonl
done
kill $smi
python3 - <<'PY'
import json, os, glob
out = os.environ["OUT"]
mk = {}; cu = {}
for f in sorted(glob.glob(f"{out}/steady-mk-*.jsonl")):
    for r in map(json.loads, open(f)): mk.setdefault((r["shape"], r["causal"]), []).append(r["tflops"])
for f in sorted(glob.glob(f"{out}/steady-cudnn-*.jsonl")):
    for r in map(json.loads, open(f)): cu.setdefault((r["shape"], r["causal"]), []).append((r["tflops"], r["tflops_best"], r["tflops_worst"]))
for key in mk:
    m = mk[key]; c = cu.get(key, [])
    print(key[0], "causal" if key[1] else "full", "mkernel", " ".join(f"{x:.0f}" for x in m),
          "cudnn", " ".join(f"{x[0]:.0f}[{x[2]:.0f}-{x[1]:.0f}]" for x in c),
          "ratio", " ".join(f"{a/b[0]:.3f}" for a, b in zip(m, c)))
PY
