# Session 23, call 2 (4x H200): send tiles' partials by the LSU path, two forms: the consumers'
# stores from registers (`--send-copy consumers`, call 1's `--direct true`: 2-4% slower) and the
# helper thread's warp (lanes 1-31) copying the staged partial with 16-byte stores (`warp`),
# against the helper's TMA bulk copy (`tma`, the default). Correctness first (gpu_gemm_rs
# lsu_sends and pushed_partials: 1 x 2 and 1 x 4), then bench gemm-rs / gemm-ar at 1 x 4.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-570}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
timeout 240 $H/bin/test-gpu_gemm_rs --test-threads 1 lsu_sends pushed_partials > $L/test-lsu.log 2>&1; stamp "tests lsu_sends pushed_partials rc=$?"
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b c; do
  for d in tma warp consumers; do bb rs-$d-$rep $H/bin/mkernel bench gemm-rs --world 4 $S --send-copy $d; done
done
for rep in a b; do
  for d in tma warp; do bb ar-$d-$rep $H/bin/mkernel bench gemm-ar --world 4 $S --send-copy $d --one-shot false; done
done
pack
cat $L/stamps.txt
grep -E "^test |test result|panicked" $L/test-lsu.log | head -8
for f in $L/rs-*.log $L/ar-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $7}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $7}' | tr '\n' ' ')"; done
