# Session 15, call 1 (2x H200): (a) replay the fourteenth session's failing seed of the
# all-reduce pulling without prefetches, old checker (HEAD 6a7fe24) and new (bound on the fp32
# accumulation); (b) this session's code under gpu_gemm_rs, gpu_comm (local_peers) and the suites
# that did not run last session.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
CASE="rank-check gemm-ar --one-shot off --push off --prefetch off --shape 8192x4096x4096 --layout kn --rounds 2"
for v in mkernel-old mkernel; do
  MKERNEL_SEED=1795828215035809835 timeout 120 $H/bin/$v launch -n 2 --timeout-s 110 -- $H/bin/$v $CASE > $L/replay-$v.log 2>&1
  stamp "replay $v rc=$? $(grep -h 'error\|worst' $L/replay-$v.log | head -3 | cut -c1-300)"
done
for i in 1 2 3; do
  timeout 120 $H/bin/mkernel launch -n 2 --timeout-s 110 -- $H/bin/mkernel $CASE > $L/fresh-$i.log 2>&1
  stamp "fresh $i rc=$? $(grep -h 'seed\|worst' $L/fresh-$i.log | head -3 | cut -c1-200)"
done
for t in gpu_gemm_rs gpu_comm gpu_attention gpu_ring_attention gpu_soak gpu_gemm_gather; do
  timeout 200 $H/bin/test-$t --test-threads 1 > $L/$t.log 2>&1
  stamp "$t rc=$? $(grep 'test result' $L/$t.log)"
done
pack
