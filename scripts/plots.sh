#!/usr/bin/env bash
# Redraws docs/plots from the GPU logs in docs/gpu-logs: one `mkernel plot` per device call, so
# that every chart only divides times measured in the same call (the GPU drifts between calls).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --quiet --bin mkernel
plot() { ./target/debug/mkernel plot --out docs/plots "$@"; }
rm -rf docs/plots
L=docs/gpu-logs/2026-11-22-h200x4-ag-gemm
F=docs/gpu-logs/2026-11-22-h200x4-final-b7f267e
# AllGather + GEMM, world 2 and 4, one and two (emulated) nodes, beside torch: commit f50d8ba.
plot $L/aggemm-w{2,4}-n{1,2}-f50d8ba.jsonl $L/torch-multi-w{2,4}-f50d8ba.jsonl
# AllGather + GEMM in place: commit df4678d (no torch run in that call).
plot $L/aggemm-inplace-w{2,4}-df4678d.jsonl
# All-gather, world 4, beside NCCL: commit b7214f4.
# The in-place run's copy-engine rows carry no in_place tag (the bench adds one since): plotted on
# their own they form a chart with no mkernel series, which `plot` names and leaves undrawn,
# instead of replacing the other run's copy-engine bars.
plot $L/allgather-w4-{n1,n4}-b7214f4.jsonl $L/torch-multi-w4-8192-b7214f4.jsonl
plot $L/allgather-w4-inplace-b7214f4.jsonl $L/torch-multi-w4-8192-b7214f4.jsonl
# GEMM vs cuBLAS and GEMM + ReduceScatter / AllReduce beside torch: commit b7f267e.
plot $F/gemm-rs-ar.jsonl $F/gemm.jsonl $F/torch-multi.jsonl
# AllGather + GEMM at world 2 beside torch: the seventh session's figures of record (call 9,
# binary of 7691c54); replaces the f50d8ba chart of the same name drawn above.
G=docs/gpu-logs/2026-11-27g-moe-controls
plot $G/call9/ag-w2-n1.jsonl $G/call9/torch-multi-w2.jsonl
# MoE dispatch + grouped GEMM beside torch (all_to_all + grouped_mm), world 2: the code of the
# ninth session of 2026-11-27 (call 7; the later of two runs drawn).
S=docs/gpu-logs/2026-11-27i-ar-prefetch
plot $S/call7/moe-w2-2.jsonl $S/call7/torch-moe-w2.jsonl
# GEMM + RS / AR at world 2 with the prefetched partials (call 3), and the three tensor-parallel
# ops at world 4, 1 x 4 and 2 x 2 (call 6), each beside torch_baselines.py multi of its call;
# they replace the charts of the same names drawn above.
plot $S/call3/gemm-rs-w2-n1.jsonl $S/call3/gemm-ar-w2-n1.jsonl $S/call3/torch-multi-w2.jsonl
plot $S/call6/ag-w4-n{1,2}.jsonl $S/call6/gemm-{rs,ar}-w4-n1.jsonl $S/call6/torch-multi-w4.jsonl
# The all-gather alone at worlds 2 and 4 with the tenth session's defaults, beside NCCL (call 5;
# the second of two runs; NCCL's all-gather lines of torch_baselines.py multi only): replaces
# the world-4 chart drawn above.
T=docs/gpu-logs/2026-11-27j-nvlink-lsu
plot $T/call5/w4-auto-r2.jsonl $T/call5/torch-multi-w4-allgather.jsonl
plot $T/call5/w2-auto-r2.jsonl $T/call5/torch-multi-w2-allgather.jsonl
# GEMM + RS / AR at worlds 2 and 4 (1 x 4) with the own tile's partial staged in shared memory:
# the eleventh session's call 5 (f367066), first of two runs, beside torch_baselines.py multi of
# the same call; replaces the charts of the same names drawn above.
K=docs/gpu-logs/2026-11-27k-rs-staged-partial
plot $K/call5/gemm-{rs,ar}-w2-n1.jsonl $K/call5/torch-multi-w2.jsonl
plot $K/call5/gemm-{rs,ar}-w4-n1.jsonl $K/call5/torch-multi-w4.jsonl
