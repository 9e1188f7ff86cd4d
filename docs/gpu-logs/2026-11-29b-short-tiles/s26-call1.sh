# Session 26, call 1 (1x H200): short tiles (an expert's last tile row of <= 64 rows: the two consumer
# warpgroups split its columns). One-GPU tests, then the grouped GEMM at world 1 on the per-rank
# problems of world 2 / 4 DeepSeek-like and world 2 Mixtral-like, new module against HEAD's
# (MKERNEL_MODULE=head.cubin), interleaved; the plain GEMM old against new.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
export MKERNEL_REQUIRE_GPU=1
for t in gpu_moe gpu_gemm gpu_gemm_gather gpu_gemm_rs; do
  timeout 300 $H/bin/test-$t --test-threads 1 > $L/t-$t.log 2>&1; stamp "$t rc=$?"
done
C=4096x7168x2048x128x8,4096x7168x2048x64x8,8192x4096x14336x4x2
for r in 1 2; do
  timeout 150 $H/bin/mkernel bench moe --world 1 --configs $C --layouts kn,nk --json $L/moe-new-$r.jsonl > $L/moe-new-$r.log 2>&1; stamp "moe new $r rc=$?"
  MKERNEL_MODULE=$H/bin/head.cubin timeout 150 $H/bin/mkernel bench moe --world 1 --configs $C --layouts kn,nk --json $L/moe-old-$r.jsonl > $L/moe-old-$r.log 2>&1; stamp "moe old $r rc=$?"
done
G=8192x8192x8192,16384x4096x8192
timeout 100 $H/bin/mkernel bench gemm --shapes $G --json $L/gemm-new.jsonl > $L/gemm-new.log 2>&1; stamp "gemm new rc=$?"
MKERNEL_MODULE=$H/bin/head.cubin timeout 100 $H/bin/mkernel bench gemm --shapes $G --json $L/gemm-old.jsonl > $L/gemm-old.log 2>&1; stamp "gemm old rc=$?"
pack
cat $L/stamps.txt
grep -h "test result\|skipped: no CUDA" $L/t-*.log | sort | uniq -c
for f in $L/moe-*.log $L/gemm-*.log; do echo "== $(basename $f)"; grep -v "^\s*$" $f | tail -14; done
