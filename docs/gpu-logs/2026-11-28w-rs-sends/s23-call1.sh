# Session 23, call 1 (4x H200): the reduce-scatter's send tiles storing their partials straight
# from the consumers' registers into the owners' inboxes (--direct on) instead of staging them
# for the helper's TMA bulk copy. Correctness first (gpu_gemm_rs direct_sends: 1 x 2 and 1 x 4),
# then bench gemm-rs / gemm-ar at 1 x 4, direct off/on interleaved, beside torch multi.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-570}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv > $L/gpu.txt 2>&1
timeout 200 $H/bin/test-gpu_gemm_rs --test-threads 1 direct_sends > $L/test-direct.log 2>&1; stamp "test direct_sends rc=$?"
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  for d in false true; do bb rs-$d-$rep $H/bin/mkernel bench gemm-rs --world 4 $S --direct $d; done
done
for d in false true; do bb ar-$d $H/bin/mkernel bench gemm-ar --world 4 $S --direct $d --one-shot false; done
l=$(( LIMIT - SECONDS )); [ $l -gt 100 ] && l=100
[ $l -gt 20 ] && { timeout $l python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"; }
pack
cat $L/stamps.txt
grep -E "test result|passed|FAILED|panicked" $L/test-direct.log | head -8
for f in $L/rs-*.log $L/ar-*.log; do echo "== $(basename $f)"; grep -E 'mkernel-fused|gemm-alone' $f | awk '{print $4, $7, $8}' ; done
grep -E "gemm_rs|gemm_ar|reduce_scatter|all_reduce" $L/torch-multi-w4.log | head -20
