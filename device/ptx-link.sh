#!/usr/bin/env bash
# Link step for rustc's nvptx64 target (passed as `-C linker=`): rustc hands us the bitcode of the
# device crate and its dependencies in the llvm-bitcode-linker's argument form; we link it with the
# pinned toolchain's own llvm-tools, keep only the exported kernels, optimise, and emit sm_90a PTX.
# MKERNEL_LLVM_BIN (set by build.rs) names the llvm-tools directory of that toolchain.
set -euo pipefail
bin="${MKERNEL_LLVM_BIN:?MKERNEL_LLVM_BIN must name the llvm-tools bin directory (build.rs sets it)}"
cpu="sm_90a"
ptx_features="${MKERNEL_PTX_FEATURES:-+ptx80}"
out=""
exports=()
inputs=()
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    --export-symbol) exports+=("$2"); shift 2 ;;
    --export-symbol=*) exports+=("${1#*=}"); shift ;;
    --target-cpu) cpu="$2"; shift 2 ;;
    --target-cpu=*) cpu="${1#*=}"; shift ;;
    -L|--target|--linker-path|--llvm-bin-dir|--fallback-arch) shift 2 ;;
    -O*|--debug|-L*|--target=*) shift ;;
    -*) shift ;;
    *) inputs+=("$1"); shift ;;
  esac
done
[ -n "$out" ] || { echo "ptx-link: no -o given" >&2; exit 2; }
[ ${#exports[@]} -gt 0 ] || { echo "ptx-link: rustc exported no kernels" >&2; exit 2; }
tmp="$(mktemp -d)"; trap 'rm -rf "$tmp"' EXIT
"$bin/llvm-link" --ignore-non-bitcode "${inputs[@]}" -o "$tmp/linked.bc"
keep="$(IFS=,; echo "${exports[*]}")"
"$bin/opt" "--internalize-public-api-list=$keep" -passes='internalize,globaldce,default<O3>' \
  "$tmp/linked.bc" -o "$tmp/opt.bc"
"$bin/llc" -mtriple=nvptx64-nvidia-cuda "-mcpu=$cpu" "-mattr=$ptx_features" -O3 "$tmp/opt.bc" -o "$out"
