# Session 15, call 3 (2x H200): the all-reduce's mover CTAs (--movers): their GPU test, then
# fused / GEMM alone with 0 (HEAD's helpers push), 4 and 8 movers interleaved three times beside
# the reduce-scatter, then the whole gpu_gemm_rs suite on this code.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
timeout 150 $H/bin/test-gpu_gemm_rs --test-threads 1 movers > $L/movers-test.log 2>&1
stamp "movers test rc=$? $(grep 'test result' $L/movers-test.log)"
bb() { local tag=$1; shift; timeout 100 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$? $(grep -m1 -i 'error' $L/$tag.log | cut -c1-200)"; }
for rep in a b c; do
  bb m0-$rep-gemm-ar-w2 gemm-ar --world 2
  bb m4-$rep-gemm-ar-w2 gemm-ar --world 2 --movers 4
  bb m8-$rep-gemm-ar-w2 gemm-ar --world 2 --movers 8
  bb m0-$rep-gemm-rs-w2 gemm-rs --world 2
done
python3 $H/ab.py $L | tee $L/ab.txt
timeout 250 $H/bin/test-gpu_gemm_rs --test-threads 1 > $L/gpu_gemm_rs.log 2>&1
stamp "gpu_gemm_rs rc=$? $(grep 'test result' $L/gpu_gemm_rs.log)"
pack
