"""cuDNN attention (torch SDPA) timed in the sustained state, beside `mkernel bench attention
--warmup 50 --reps 200`: 50 untimed launches, then the median of 200, each bracketed by CUDA events
after a sync (torch_baselines.py's method, which stays the baseline of record, with 5 and 20).
Short runs of the 4 ms shapes fall in the clock transient at the start of a burst (the SM clock
moves between about 1650 and 1980 MHz on an H200 while the power limit settles), so their medians
move by up to 10% from one process to the next; a second of load leaves both kernels at the
power-capped clock a training job runs at. Usage: python3 cudnn_steady.py out.jsonl
"""
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

CONFIGS = [(4, 16, 8192, 128), (1, 16, 32768, 128), (4, 32, 8192, 64)]  # mkernel bench attention's


def main(path):
    out = open(path, "w")
    gpu = torch.cuda.get_device_name(0)
    for (b, h, s, d) in CONFIGS:
        q = torch.randn(b, h, s, d, device="cuda", dtype=torch.bfloat16)
        k, v = torch.randn_like(q), torch.randn_like(q)
        for causal in (False, True):
            with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
                for _ in range(50):
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                torch.cuda.synchronize()
                ts = []
                for _ in range(200):
                    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                    e0.record()
                    F.scaled_dot_product_attention(q, k, v, is_causal=causal)
                    e1.record()
                    torch.cuda.synchronize()
                    ts.append(e0.elapsed_time(e1))
            ts.sort()
            flop = 4 * b * h * s * s * d / (2 if causal else 1)
            r = dict(op="attention", impl="cudnn_steady", gpu=gpu, shape=f"{b}x{h}x{s}x{d}", causal=causal,
                     ms=ts[100], tflops=flop / ts[100] / 1e9, tflops_fastest=flop / ts[0] / 1e9,
                     tflops_slowest=flop / ts[-1] / 1e9)
            print(json.dumps(r), file=out, flush=True)
            print(f"cudnn_steady {r['shape']} {'causal' if causal else 'full'} {r['tflops']:.1f} TFLOP/s")


if __name__ == "__main__":
    main(sys.argv[1])
