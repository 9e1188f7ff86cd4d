#!/usr/bin/env bash
# Build the release test and bench binaries here (the GPU machines have no Rust toolchain), strip
# them, and put them with scripts/gpu-run.sh in .gpu/ (git-ignored), ready to be carried to a GPU
# machine and run there: `bash .gpu/gpu-run.sh [tests|bench|all]`.
# `--trace` also builds `mkernel-trace`, whose module keeps launch timelines (the device crate's
# `trace` feature; `bench ag-gemm|moe --trace FILE`), in a target directory of its own.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf .gpu && mkdir -p .gpu/bin
cargo build --release --bin mkernel -q
cp target/release/mkernel .gpu/bin/
if [ "${1:-}" = "--trace" ]; then
  CARGO_TARGET_DIR=target/trace MKERNEL_DEVICE_FEATURES=trace cargo build --release --bin mkernel -q
  cp target/trace/release/mkernel .gpu/bin/mkernel-trace
fi
cargo test --release --no-run --message-format=json -q 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and m["profile"]["test"]:
        kind = m["target"]["kind"][0]  # the lib and the bin are both named mkernel
        print(m["target"]["name"] + ("-bin" if kind == "bin" else ""), m["executable"])' \
  | while read -r name exe; do cp "$exe" ".gpu/bin/test-$name"; done
cargo bench --no-run --message-format=json -q 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m = json.loads(l)
    if m.get("reason") == "compiler-artifact" and m.get("executable") and "bench" in m["target"]["kind"]:
        print(m["target"]["name"], m["executable"])' \
  | while read -r name exe; do cp "$exe" ".gpu/bin/bench-$name"; done
cargo build --release --examples -q
for ex in examples/*.rs; do name="$(basename "$ex" .rs)"; cp "target/release/examples/$name" ".gpu/bin/example-$name"; done
strip .gpu/bin/*
cp scripts/gpu-run.sh scripts/cudnn_steady.py .gpu/
[ -f ../shared/bench/torch_baselines.py ] && cp ../shared/bench/torch_baselines.py .gpu/ || true
du -sh .gpu; ls .gpu/bin
