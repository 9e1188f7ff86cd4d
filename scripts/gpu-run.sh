#!/usr/bin/env bash
# Run on a Hopper machine (no Rust there): the binaries staged by scripts/stage-gpu.sh.
#   bash .gpu/gpu-run.sh MODE... [-- extra args for `mkernel bench gemm`]
# Modes: tests (every test binary, MKERNEL_REQUIRE_GPU=1: a skip is a failure; MKERNEL_TESTS
# limits which), bench (GEMM vs cuBLAS table + JSON), criterion, fifo (FIFO throughput and
# latency), comm (all-gather benches in both layouts + NCCL all_gather baseline; 2+ GPUs;
# MKERNEL_AG_CTAS, MKERNEL_AG_COPY and MKERNEL_AG_ARGS vary it), aggemm (AllGather + GEMM at
# world 2 and every GPU, one node and emulated nodes; MKERNEL_AGGEMM_ARGS adds options), rsar
# (GEMM + ReduceScatter / AllReduce at world 2 and every GPU, one node and emulated nodes;
# MKERNEL_RSAR_ARGS), moe (MoE dispatch + grouped GEMM beside torch_baselines.py moe at world 2
# and every GPU; MKERNEL_MOE_ARGS),
# attention (bench attention beside torch_baselines.py single's cuDNN / FA2; MKERNEL_ATTN_ARGS),
# attention-steady (named only: ours and cuDNN's after 50 launches, median of 200; cudnn_steady.py),
# ring (bench ring-attention at world 2 and every GPU, 1 and 2 nodes, beside torch_baselines.py
# ring; MKERNEL_RING_ARGS),
# sanitize (memcheck, racecheck, synccheck over the single-process GPU tests and every fused op's
# rank-check at 1 x 2; CS overrides the sanitizer's path), soak (tests/gpu_soak.rs) -- these two
# only when named --,
# torch (torch_baselines.py multi at world 2 and every GPU, same call), all;
# small (named only: the small and skinny GEMM shapes of issue 15 with the default plan and with
# each variant of MKERNEL_SMALL_VARIANTS, e.g. "w64:--tile-n,64;sk:--stream-k,on", the seven
# large shapes, torch_baselines.py single on the same shapes, all in one call).
# Logs go to $OUT (or ./gpu-out): one tests log, one bench log, JSON lines.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="${OUT:-$PWD/gpu-out}"; mkdir -p "$out"
modes=(); extra=()
while [ $# -gt 0 ]; do
  if [ "$1" = -- ]; then shift; extra=("$@"); break; fi
  modes+=("$1"); shift
done
[ ${#modes[@]} -gt 0 ] || modes=(all)
want() { for m in "${modes[@]}"; do [ "$m" = "$1" ] || [ "$m" = all ] && return 0; done; return 1; }
# Long modes `all` leaves out: asked for by name only.
want_named() { for m in "${modes[@]}"; do [ "$m" = "$1" ] && return 0; done; return 1; }
export MKERNEL_REQUIRE_GPU=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export MKERNEL_BIN="$here/bin/mkernel"
ngpu=$(nvidia-smi -L | wc -l)
[ "$ngpu" -ge 2 ] && export MKERNEL_REQUIRE_GPUS=$ngpu
# Multi-GPU benches run at world 2 and at every GPU.
worlds="2"; [ "$ngpu" -gt 2 ] && worlds="2 $ngpu"
{ nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm --format=csv; nvidia-smi topo -m 2>/dev/null | head -5; } | tee "$out/gpu.txt"
status=0
"$here/bin/mkernel" info 2>&1 | tee -a "$out/gpu.txt"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
if want tests; then
  : > "$out/tests.log"; : > "$out/tests-full.log"
  for t in "$here"/bin/test-*; do
    name="${t##*/test-}"
    if [ -n "${MKERNEL_TESTS:-}" ] && ! [[ " $MKERNEL_TESTS " == *" $name "* ]]; then continue; fi
    start=$SECONDS
    echo "=== $name" >> "$out/tests-full.log"
    timeout "${MKERNEL_TEST_TIMEOUT:-240}" "$t" --test-threads=1 --nocapture >> "$out/tests-full.log" 2>&1; rc=$?
    summary=$(sed -n "/^=== $name\$/,\$p" "$out/tests-full.log" | grep -E "^test result:" | tail -n1)
    printf '%-18s rc=%d %4ds %s\n' "$name" "$rc" "$((SECONDS - start))" "$summary" | tee -a "$out/tests.log"
    [ $rc -eq 0 ] || status=1
  done
fi
if want bench; then
  "$here/bin/mkernel" bench gemm --json "$out/gemm.jsonl" "${extra[@]}" 2>> "$out/bench.log" | tee -a "$out/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if want criterion; then
  for b in "$here"/bin/bench-*; do
    [ -e "$b" ] || continue
    timeout 300 "$b" --bench --noplot 2>&1 | grep -E "^gemm_bf16|time:" | tee -a "$out/bench.log" || status=1
  done
fi
if want fifo; then
  "$here/bin/mkernel" bench fifo ${MKERNEL_FIFO_ARGS:-} 2>&1 | tee -a "$out/bench.log"; [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if want comm && [ "$ngpu" -ge 2 ]; then
  for layout in "-n $ngpu --nodes 1" "-n $ngpu --nodes $ngpu"; do
    for ctas in ${MKERNEL_AG_CTAS:-16}; do
      for copy in ${MKERNEL_AG_COPY:-bulk}; do
        echo "== mkernel all-gather, launch $layout, $ctas copy CTAs, $copy" | tee -a "$out/bench.log"
        "$here/bin/mkernel" launch $layout --timeout-s 300 -- "$here/bin/mkernel" bench allgather --intra-ctas "$ctas" --copy "$copy" ${MKERNEL_AG_ARGS:-} --json "$out/ag-n${layout##* }-c$ctas-$copy.jsonl" 2>&1 | tee -a "$out/bench.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      done
    done
  done
  # The NVLink rate of the copy CTAs alone: in place, nothing is copied locally, so the kernel
  # moves exactly the bytes of the copy-engine baseline printed beside it.
  for copy in ${MKERNEL_AG_COPY:-bulk}; do
    echo "== mkernel all-gather in place, launch -n $ngpu --nodes 1, 16 copy CTAs, $copy" | tee -a "$out/bench.log"
    "$here/bin/mkernel" launch -n "$ngpu" --nodes 1 --timeout-s 300 -- "$here/bin/mkernel" bench allgather --intra-ctas 16 --copy "$copy" --in-place --json "$out/ag-inplace-$copy.jsonl" 2>&1 | tee -a "$out/bench.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  done
  if [ -f "$here/torch_baselines.py" ]; then
    echo "== NCCL baseline (torch_baselines.py multi)" | tee -a "$out/bench.log"
    PYTHONUNBUFFERED=1 timeout 300 python3 "$here/torch_baselines.py" multi --shapes 8192x8192x8192 --json "$out/nccl.jsonl" 2>&1 | grep -E "all_gather|all_reduce|Error|error" | tee -a "$out/bench.log"
  fi
fi
if want aggemm && [ "$ngpu" -ge 2 ]; then
  for w in $worlds; do
    for nodes in 1 2; do
      echo "== mkernel bench ag-gemm, world $w, $nodes node(s)" | tee -a "$out/bench.log"
      "$here/bin/mkernel" bench ag-gemm --world "$w" --nodes "$nodes" ${MKERNEL_AGGEMM_ARGS:-} --json "$out/aggemm-w$w-n$nodes.jsonl" 2>&1 | tee -a "$out/bench.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
  done
fi
if want rsar && [ "$ngpu" -ge 2 ]; then
  for w in $worlds; do
    for op in gemm-rs gemm-ar; do
      for nodes in 1 2; do
        echo "== mkernel bench $op, world $w, $nodes node(s)" | tee -a "$out/bench.log"
        "$here/bin/mkernel" bench "$op" --world "$w" --nodes "$nodes" ${MKERNEL_RSAR_ARGS:-} --json "$out/$op-w$w-n$nodes.jsonl" 2>&1 | tee -a "$out/bench.log"
        [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
      done
    done
  done
fi
if want moe && [ "$ngpu" -ge 2 ]; then
  for w in $worlds; do
    echo "== mkernel bench moe, world $w" | tee -a "$out/bench.log"
    "$here/bin/mkernel" bench moe --world "$w" ${MKERNEL_MOE_ARGS:-} --json "$out/moe-w$w.jsonl" 2>&1 | tee -a "$out/bench.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    if [ -f "$here/torch_baselines.py" ]; then
      echo "== torch_baselines.py moe, world $w" | tee -a "$out/bench.log"
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((w - 1))) PYTHONUNBUFFERED=1 timeout 400 python3 "$here/torch_baselines.py" moe --json "$out/torch-moe-w$w.jsonl" 2>&1 | grep -vE "^\s*$" | tee -a "$out/bench.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    fi
  done
fi
if want attention; then
  echo "== mkernel bench attention" | tee -a "$out/bench.log"
  "$here/bin/mkernel" bench attention ${MKERNEL_ATTN_ARGS:-} --json "$out/attention.jsonl" 2>> "$out/bench.log" | tee -a "$out/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if [ -f "$here/torch_baselines.py" ]; then
    echo "== torch_baselines.py single (cuDNN / FA2 attention, cuBLAS)" | tee -a "$out/bench.log"
    PYTHONUNBUFFERED=1 timeout 400 python3 "$here/torch_baselines.py" single --shapes 8192x8192x8192 --json "$out/torch-single.jsonl" 2>&1 | grep -E "attention|Error|error" | tee -a "$out/bench.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
if want_named attention-steady; then
  # The sustained state: ours and cuDNN's each after 50 launches, median of 200 (cudnn_steady.py).
  echo "== mkernel bench attention --warmup 50 --reps 200, then cudnn_steady.py" | tee -a "$out/bench.log"
  "$here/bin/mkernel" bench attention --warmup 50 --reps 200 --json "$out/attention-steady.jsonl" 2>> "$out/bench.log" | tee -a "$out/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  PYTHONUNBUFFERED=1 timeout 300 python3 "$here/cudnn_steady.py" "$out/cudnn-steady.jsonl" 2>&1 | tee -a "$out/bench.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
fi
if want ring && [ "$ngpu" -ge 2 ]; then
  for w in $worlds; do
    for nodes in 1 2; do
      echo "== mkernel bench ring-attention, world $w, $nodes node(s)" | tee -a "$out/bench.log"
      "$here/bin/mkernel" bench ring-attention --world "$w" --nodes "$nodes" ${MKERNEL_RING_ARGS:-} --json "$out/ring-w$w-n$nodes.jsonl" 2>&1 | tee -a "$out/bench.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    done
    if [ -f "$here/torch_baselines.py" ]; then
      echo "== torch_baselines.py ring, world $w" | tee -a "$out/bench.log"
      CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((w - 1))) PYTHONUNBUFFERED=1 timeout 400 python3 "$here/torch_baselines.py" ring --json "$out/torch-ring-w$w.jsonl" 2>&1 | grep -vE "^\s*$" | tee -a "$out/bench.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
    fi
  done
fi
if want_named sanitize; then
  # compute-sanitizer over the single-process GPU tests and, with two GPUs, every fused op's
  # rank-check (one process per rank, each under the sanitizer); device waits get long bounds
  # because sanitized kernels run far slower.
  cs="${CS:-/usr/local/cuda/bin/compute-sanitizer}"
  : > "$out/sanitize.log"
  sanitize() {
    local name=$1; shift
    timeout 240 "$@" > "$out/cs-$name.log" 2>&1; local rc=$?
    printf '%-28s rc=%d %s\n' "$name" "$rc" "$(grep -hE 'ERROR SUMMARY|RACECHECK SUMMARY' "$out/cs-$name.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')" | tee -a "$out/sanitize.log"
    [ $rc -eq 0 ] || status=1
  }
  for tool in memcheck racecheck synccheck; do
    sanitize "$tool-gemm" "$cs" --tool "$tool" --error-exitcode 9 "$here/bin/test-gpu_gemm" --test-threads=1
    sanitize "$tool-attention" "$cs" --tool "$tool" --error-exitcode 9 "$here/bin/test-gpu_attention" --test-threads=1 --skip bench_shape
    sanitize "$tool-selftest" "$cs" --tool "$tool" --error-exitcode 9 "$here/bin/test-gpu_selftest" --test-threads=1 --skip device_trap
    if [ "$ngpu" -ge 2 ]; then
      for check in "ag-gemm --rounds 1 --back-to-back 2" "gemm-rs --rounds 1 --back-to-back 2" "moe --rounds 1 --back-to-back 2" \
                   "ring-attention --config 1x2x200x128 --causal --repeat 1" "allgather --iters 2"; do
        op=${check%% *}
        sanitize "$tool-$op" "$here/bin/mkernel" launch -n 2 --timeout-s 230 -- "$cs" --tool "$tool" --error-exitcode 9 \
          "$here/bin/mkernel" rank-check $check --timeout-ms 200000
      done
    fi
  done
fi
if want_named soak; then
  timeout 300 "$here/bin/test-gpu_soak" --nocapture > "$out/soak.log" 2>&1; rc=$?
  grep -E "soak ok|panicked|Error" "$out/soak.log" | tee -a "$out/bench.log"
  [ $rc -eq 0 ] || status=1
fi
if want_named small; then
  small="1x8192x8192,16x8192x8192,64x8192x8192,128x8192x8192,256x8192x8192,1x28672x8192,16x28672x8192,64x28672x8192,128x28672x8192,256x28672x8192,1x4096x14336,16x4096x14336,64x4096x14336,128x4096x14336,256x4096x14336"
  large="8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192"
  # Each variant: a name, then `mkernel bench gemm` flags (MKERNEL_SMALL_VARIANTS: "name:flag,flag;...").
  IFS=';' read -ra variants <<< "default:;${MKERNEL_SMALL_VARIANTS:-}"
  for v in "${variants[@]}"; do
    [ -n "$v" ] || continue
    name=${v%%:*}; IFS=',' read -ra args <<< "${v#*:}"
    echo "== bench gemm, small shapes, $name ${args[*]}" | tee -a "$out/small.log"
    "$here/bin/mkernel" bench gemm --shapes "${MKERNEL_SMALL_SHAPES:-$small}" --reps "${MKERNEL_SMALL_REPS:-50}" "${args[@]}" --json "$out/small-$name.jsonl" 2>> "$out/small.log" | tee -a "$out/small.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  done
  echo "== bench gemm, large shapes" | tee -a "$out/small.log"
  "$here/bin/mkernel" bench gemm --shapes "$large" --json "$out/large.jsonl" 2>> "$out/small.log" | tee -a "$out/small.log"
  [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  if [ -f "$here/torch_baselines.py" ]; then
    echo "== torch_baselines.py single --shapes (small and large)" | tee -a "$out/small.log"
    PYTHONUNBUFFERED=1 timeout 400 python3 "$here/torch_baselines.py" single --shapes "${MKERNEL_SMALL_SHAPES:-$small},$large" --json "$out/torch-single.jsonl" 2>&1 | grep -E "gemm|Error|error" | tee -a "$out/small.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  fi
fi
if want torch && [ "$ngpu" -ge 2 ] && [ -f "$here/torch_baselines.py" ]; then
  for w in $worlds; do
    echo "== torch_baselines.py multi, world $w" | tee -a "$out/bench.log"
    CUDA_VISIBLE_DEVICES=$(seq -s, 0 $((w - 1))) PYTHONUNBUFFERED=1 timeout 400 python3 "$here/torch_baselines.py" multi ${MKERNEL_TORCH_ARGS:-} --json "$out/torch-multi-w$w.jsonl" 2>&1 | grep -vE "^\s*$" | tee -a "$out/bench.log"
    [ "${PIPESTATUS[0]}" -eq 0 ] || status=1
  done
fi
echo "== summary"; cat "$out/tests.log" 2>/dev/null; grep -vE '^\{' "$out/bench.log" 2>/dev/null | tail -n 40
exit $status
