# Session 15, call 6 (2x H200): the all-reduce's ranks pulling each other's reduced tiles
# (--pull-reduced): its GPU test, then fused / GEMM alone pushing (HEAD's default) against
# pulling, interleaved three times, with the tuned lead and lead 128; the reduce-scatter beside.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
timeout 150 $H/bin/test-gpu_gemm_rs --test-threads 1 reduced_tiles_pulled > $L/pull-test.log 2>&1
stamp "pull test rc=$? $(grep 'test result' $L/pull-test.log)"
bb() { local tag=$1; shift; timeout 100 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$? $(grep -m1 -i 'error' $L/$tag.log | cut -c1-200)"; }
for rep in a b c; do
  bb push-$rep-gemm-ar-w2 gemm-ar --world 2
  bb pull-$rep-gemm-ar-w2 gemm-ar --world 2 --pull-reduced on
  bb pullL128-$rep-gemm-ar-w2 gemm-ar --world 2 --pull-reduced on --lead 128
  bb push-$rep-gemm-rs-w2 gemm-rs --world 2
done
python3 $H/ab.py $L | tee $L/ab.txt
pack
