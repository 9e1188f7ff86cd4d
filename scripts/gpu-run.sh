#!/usr/bin/env bash
# Run on a Hopper machine (no Rust there): the test binaries staged by scripts/stage-gpu.sh with
# MKERNEL_REQUIRE_GPU=1 (a skip is a failure), then the benchmarks. Logs go to $OUT (or ./gpu-out).
#   bash .gpu/gpu-run.sh [tests|bench|all] [extra bench args...]
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
what="${1:-all}"; shift || true
export MKERNEL_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv | tee "$out/gpu.txt"
"$here/bin/mkernel" info 2>&1 | tee "$out/info.txt"
[ "${PIPESTATUS[0]}" -eq 0 ] || status_info=1
status=${status_info:-0}
if [ "$what" = tests ] || [ "$what" = all ]; then
  : > "$out/tests.log"
  for t in "$here"/bin/test-*; do
    name="${t##*/test-}"
    start=$SECONDS
    timeout "${MKERNEL_TEST_TIMEOUT:-240}" "$t" --test-threads=1 --nocapture > "$out/test-$name.log" 2>&1; rc=$?
    secs=$((SECONDS - start))
    summary=$(grep -E "^test result:" "$out/test-$name.log" | tail -n1)
    printf '%-18s rc=%d %4ds %s\n' "$name" "$rc" "$secs" "$summary" | tee -a "$out/tests.log"
    [ $rc -eq 0 ] || { status=1; grep -E "panicked|FAILED|failed" "$out/test-$name.log" | head -n 20; }
  done
fi
if [ "$what" = bench ] || [ "$what" = all ]; then
  "$here/bin/mkernel" bench gemm --json "$out/gemm.jsonl" "$@" 2> "$out/bench.err" | tee "$out/bench.txt"
  [ "${PIPESTATUS[0]}" -eq 0 ] || { status=1; tail -n 20 "$out/bench.err"; }
fi
if [ "$what" = criterion ] || [ "$what" = all ]; then
  for b in "$here"/bin/bench-*; do
    [ -e "$b" ] || continue
    timeout 300 "$b" --bench --noplot > "$out/${b##*/}.txt" 2>&1 || status=1
    grep -E "^gemm_bf16|time:" "$out/${b##*/}.txt" | tee -a "$out/criterion-summary.txt"
  done
fi
echo "== summary"; cat "$out/tests.log" 2>/dev/null; cat "$out/bench.txt" 2>/dev/null
exit $status
