# Session 25 variant of session 18's probe: PIECES pieces of 32 MiB per pair per GEMM (2 at world
# 2 = the reduce-scatter's 64 MiB each way at 16384x4096x8192, 4 = the all-reduce's 128 MiB),
# bursts only (the sustained mode starved). Usage: PIECES=2,4 python3 interfere2.py SHAPES.
# Does NVLink traffic slow a GEMM, whoever moves it? Session 18 probe (not a bench of ours).
# Per GPU: the reduce-scatter's per-rank GEMM at 1 x 4 (M x N x K/W, bf16, cuBLAS) timed by CUDA
# events while the copy engines move 32 MiB pieces between the GPUs (torch peer copies, one
# stream per peer, issued on the source). Scenarios: GEMM alone; copies alone; GEMM + copies
# out and in on every GPU; GEMM on GPUs 0-1 with copies only into them (from 2-3) or only out of
# them (to 2-3). Bursts as the bench times them (a sync and 100 ms idle, then 25 GEMMs) and a
# sustained run (1.5 s), nvidia-smi sampling clocks and power every 20 ms.
import os, statistics, subprocess, sys, time

import torch

W = min(4, torch.cuda.device_count())
DEV = list(range(W))
PIECE = 32 << 20
shapes = [tuple(int(x) for x in s.split("x")) for s in (sys.argv[1:] or ["16384x4096x2048", "16384x8192x2048"])]

bufs = {}
for d in DEV:
    with torch.cuda.device(d):
        bufs[("src", d)] = torch.randn(PIECE // 2, device=d, dtype=torch.bfloat16)
        for s in DEV:
            if s != d:
                bufs[("dst", s, d)] = torch.empty(PIECE // 2, device=d, dtype=torch.bfloat16)
cstreams = {(s, d): torch.cuda.Stream(device=s) for s in DEV for d in DEV if s != d}
gstreams = {d: torch.cuda.Stream(device=d) for d in DEV}


def sync():
    for d in DEV:
        torch.cuda.synchronize(d)


def copies(pairs, n):
    """n pieces on every (src, dst) pair, each on the source's stream for that peer."""
    for _ in range(n):
        for s, d in pairs:
            with torch.cuda.stream(cstreams[(s, d)]):
                bufs[("dst", s, d)].copy_(bufs[("src", s)], non_blocking=True)


class Smi:
    def __enter__(self):
        self.p = subprocess.Popen(
            ["nvidia-smi", "--query-gpu=index,clocks.sm,power.draw", "--format=csv,noheader,nounits", "-lms", "20"],
            stdout=subprocess.PIPE, text=True)
        return self

    def __exit__(self, *a):
        self.p.terminate()
        out = self.p.communicate()[0]
        per = {}
        for line in out.splitlines():
            try:
                i, clk, pw = [x.strip() for x in line.split(",")]
                per.setdefault(int(i), []).append((float(clk), float(pw)))
            except ValueError:
                pass
        self.summary = {i: (statistics.median(c for c, _ in v), statistics.median(p for _, p in v)) for i, v in per.items()}


def run(mats, gemm_devs, pairs, reps, burst, pieces=1):
    """Median GEMM ms per device."""
    times = {d: [] for d in gemm_devs}
    rounds = 8 if burst else 1
    t_copy = 0.0
    for _ in range(rounds):
        sync()
        if burst:
            time.sleep(0.1)
        evs = {d: [] for d in gemm_devs}
        t0 = time.perf_counter()
        for _ in range(reps):
            # one piece per pair per GEMM: 96 MiB out of a GPU per GEMM at 1 x 4, about what
            # the reduce-scatter pushes per launch (a backlog only extends the copies past it)
            copies(pairs, pieces)
            for d in gemm_devs:
                a, b, c = mats[d]
                with torch.cuda.stream(gstreams[d]):
                    e0 = torch.cuda.Event(enable_timing=True)
                    e1 = torch.cuda.Event(enable_timing=True)
                    e0.record()
                    torch.matmul(a, b, out=c)
                    e1.record()
                    evs[d].append((e0, e1))
        sync()
        t_copy += time.perf_counter() - t0
        for d in gemm_devs:
            times[d] += [e0.elapsed_time(e1) for e0, e1 in evs[d]]
    med = {d: statistics.median(v) for d, v in times.items()}
    return med, t_copy


print(f"# {W} GPUs: {torch.cuda.get_device_name(0)}; piece {PIECE >> 20} MiB; torch {torch.__version__}")
allp = [(s, d) for s in DEV for d in DEV if s != d]
into01 = [(s, d) for s in (2, 3) for d in (0, 1)] if W == 4 else []
out01 = [(s, d) for s in (0, 1) for d in (2, 3)] if W == 4 else []
for M, N, K in shapes:
    mats = {}
    for d in DEV:
        with torch.cuda.device(d):
            mats[d] = (torch.randn(M, K, device=d, dtype=torch.bfloat16),
                       torch.randn(K, N, device=d, dtype=torch.bfloat16),
                       torch.empty(M, N, device=d, dtype=torch.bfloat16))
    run(mats, DEV, allp, 50, False)  # warm every path
    # copies alone: GB/s out of each GPU
    sync()
    with Smi() as smi:
        t0 = time.perf_counter()
        copies(allp, 40)
        sync()
        dt = time.perf_counter() - t0
    gbs = 40 * (W - 1) * PIECE / dt / 1e9
    print(f"{M}x{N}x{K} copies alone: {gbs:.0f} GB/s out of each GPU; clocks {smi.summary}")
    rows = [("gemm alone, all", DEV, [], 1)]
    rows += [(f"gemm + {p} x 32 MiB each way per GEMM", DEV, allp, p) for p in [int(x) for x in os.environ.get("PIECES", "2,4").split(",")]]
    for rep in range(2):
        for name, gd, pairs, p in rows:
            med, _ = run(mats, gd, pairs, 25, True, p)
            ms = " ".join(f"{med[d]:.4f}" for d in gd)
            print(f"{M}x{N}x{K} burst {rep} {name:36s} gemm ms {ms}", flush=True)
    del mats
    torch.cuda.empty_cache()
