#!/usr/bin/env bash
# One-time (idempotent) set-up of a build machine for mkernel:
#   - the pinned nightly toolchain with rust-src and llvm-tools (device code -> sm_90a PTX),
#   - apt packages rdma-sys needs (libibverbs, librdmacm, libclang, pkg-config),
#   - NVIDIA's ptxas / cuobjdump / nvdisasm from PyPI in a venv (PTX and SASS checks without a GPU),
#   - target/cuda-link/lib64/: what `cust` links against. With a real driver: a link to its libcuda.
#     Without one: a stub libcuda.so.1 whose entry points all return CUDA_ERROR_NO_DEVICE, so the
#     crate builds and its GPU tests skip loudly instead of failing to link.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"
toolchain="$(sed -n 's/^channel *= *"\(.*\)"/\1/p' rust-toolchain.toml)"
say() { echo "setup: $*"; }

if ! command -v rustup >/dev/null; then
  echo "setup: rustup is required (https://rustup.rs)" >&2; exit 1
fi
if ! rustup run "$toolchain" rustc --version >/dev/null 2>&1 \
   || [ ! -d "$(rustup run "$toolchain" rustc --print sysroot)/lib/rustlib/src/rust/library/core" ] \
   || [ ! -x "$(rustup run "$toolchain" rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/llc" ]; then
  say "installing $toolchain"
  rustup toolchain install "$toolchain" --profile minimal -c rust-src -c llvm-tools -c rustfmt -c clippy
fi
rustup component add --toolchain "$toolchain" rustfmt clippy >/dev/null 2>&1 || true

need=()
for p in libibverbs-dev librdmacm-dev libclang-dev pkg-config python3-venv; do
  dpkg -s "$p" >/dev/null 2>&1 || need+=("$p")
done
if [ ${#need[@]} -gt 0 ]; then
  say "apt-get install ${need[*]}"
  sudo_cmd=""; [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -q "${need[@]}"
fi

venv="$root/target/nvtools"
if [ ! -x "$venv/bin/ptxas" ] || [ ! -x "$venv/bin/cuobjdump" ] || [ ! -x "$venv/bin/nvdisasm" ]; then
  say "installing ptxas, cuobjdump and nvdisasm (PyPI) into $venv"
  python3 -m venv "$venv"
  "$venv/bin/pip" install -q nvidia-cuda-nvcc-cu12==12.9.86 nvidia-cuda-cuobjdump==13.5.37 nvidia-cuda-nvdisasm==13.5.37
  for tool in ptxas cuobjdump nvdisasm; do
    found="$(find "$venv/lib" -path "*/nvidia/*/bin/$tool" -type f | head -n1)"
    [ -n "$found" ] || { echo "setup: $tool not found in the wheels" >&2; exit 1; }
    chmod +x "$found"; ln -sf "$found" "$venv/bin/$tool"
  done
fi

link="$root/target/cuda-link/lib64"
mkdir -p "$link"
real="$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 .*x86-64/ {print $NF; exit}')"
if [ -n "$real" ] && [ ! -f "$link/.stub" ]; then
  ln -sf "$real" "$link/libcuda.so"
  say "linking against the driver's $real"
elif [ -n "$real" ]; then
  rm -f "$link"/libcuda.so* "$link/.stub"; ln -sf "$real" "$link/libcuda.so"
  say "driver found: replaced the stub with $real"
elif [ ! -f "$link/libcuda.so.1" ] || [ "$root/scripts/cuda-stub.sh" -nt "$link/libcuda.so.1" ]; then
  say "no CUDA driver here: building the libcuda link stub"
  bash "$root/scripts/cuda-stub.sh" "$link"
  touch "$link/.stub"
fi
say "done. Run: cargo test"
