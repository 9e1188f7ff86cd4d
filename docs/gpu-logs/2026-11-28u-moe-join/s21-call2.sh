# Session 21, call 2 (4x H200, same staging as call 1): the first launch timelines of the trace
# build. AllGather + GEMM at 2 x 2, 16384x4096x8192, traced and plain in the same call (does the
# tracing cost?), and the MoE at 1 x 4, DeepSeek-like.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
T=$H/bin/mkernel-trace; P=$H/bin/mkernel
timeout 70 $T bench ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 --reps 40 --trace $L/tl-ag --json $L/tl-ag.jsonl > $L/tl-ag.log 2>&1; stamp "trace ag-gemm rc=$?"
timeout 70 $P bench ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 --reps 40 --json $L/pl-ag.jsonl > $L/pl-ag.log 2>&1; stamp "plain ag-gemm rc=$?"
timeout 90 $T bench moe --world 4 --configs 4096x7168x2048x256x8 --trace $L/tl-moe --trace-epochs 30,3 --json $L/tl-moe.jsonl > $L/tl-moe.log 2>&1; stamp "trace moe rc=$?"
timeout 90 $P bench moe --world 4 --configs 4096x7168x2048x256x8 --json $L/pl-moe.jsonl > $L/pl-moe.log 2>&1; stamp "plain moe rc=$?"
pack
cat $L/stamps.txt
tail -n 25 $L/tl-ag.log; tail -n 8 $L/pl-ag.log; tail -n 25 $L/tl-moe.log; tail -n 6 $L/pl-moe.log
