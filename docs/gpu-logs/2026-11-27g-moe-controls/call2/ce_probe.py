# Does copy-engine NVLink traffic slow a GEMM on the same GPU? Two GPUs; on each, a bf16
# GEMM (the world-2 GEMM + AllReduce's per-rank product) timed by CUDA events, alone and
# while a side stream copies BYTES to the other GPU (copy engines: cudaMemcpyPeerAsync)
# in the same window. Both GPUs run at once (threads), like the fused op's two ranks.
import torch, threading, statistics, sys
M, N, K = [int(x) for x in sys.argv[1].split('x')] if len(sys.argv) > 1 else (16384, 4096, 4096)
REPS = 60
def worker(dev, peer, mode, out, barrier):
    torch.cuda.set_device(dev)
    a = torch.randn(M, K, device=dev, dtype=torch.bfloat16)
    b = torch.randn(K, N, device=dev, dtype=torch.bfloat16)
    nbytes = M * N * 2  # both phases of the all-reduce: half the output twice
    src = torch.empty(nbytes // 2, dtype=torch.uint8, device=dev)
    dst = torch.empty(nbytes // 2, dtype=torch.uint8, device=peer)
    side = torch.cuda.Stream(device=dev)
    main = torch.cuda.current_stream(dev)
    ts = []; cs = []
    for i in range(REPS + 5):
        barrier.wait()
        torch.cuda.synchronize(dev)
        barrier.wait()
        e0 = torch.cuda.Event(enable_timing=True); e1 = torch.cuda.Event(enable_timing=True)
        e0.record(main)
        c = a @ b
        e1.record(main)
        if mode != 'alone':
            # Enqueued after the GEMM, gated on its start: the copies overlap it.
            side.wait_event(e0)
            with torch.cuda.stream(side):
                chunks = 16 if mode == 'ce-spread' else 2
                n = src.numel() // chunks
                for j in range(2 * chunks):
                    o = (j % chunks) * n
                    dst[o:o + n].copy_(src[o:o + n], non_blocking=True)
            e2 = torch.cuda.Event(enable_timing=True); e2.record(side)
            main.wait_stream(side)
        torch.cuda.synchronize(dev)
        if i >= 5:
            ts.append(e0.elapsed_time(e1))
            if mode != 'alone': cs.append(e0.elapsed_time(e2))
    out[dev] = round(statistics.median(ts), 3); out[f'copies{dev}'] = round(statistics.median(cs), 3) if cs else 0
for mode in ['alone', 'ce', 'ce-spread'] * 3:
    out = {}; bar = threading.Barrier(2)
    th = [threading.Thread(target=worker, args=(d, 1 - d, mode, out, bar)) for d in (0, 1)]
    [t.start() for t in th]; [t.join() for t in th]
    print(f"{M}x{N}x{K} {mode:10s} gemm ms (median, max over GPUs) {max(out[0], out[1]):.3f}  per GPU {out}")
