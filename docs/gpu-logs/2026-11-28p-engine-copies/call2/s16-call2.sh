# Session 16, call 2 (call 1 ran it with a stream per peer: a cycle at 1 x 4) (4x H200): the copy engines moving GEMM + RS / AR partials (--engine-chunk):
# SM pushes (default) against chunks of 16, 32, 64 tiles, two runs, then the all-reduce.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
timeout 240 $H/bin/test-gpu_gemm_rs --test-threads 1 engine_copies > $L/engine-test.log 2>&1
stamp "engine test rc=$? $(grep 'test result' $L/engine-test.log)"
bb() { local tag=$1; shift; timeout 60 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb sm-$rep-gemm-rs-w4 gemm-rs --world 4 $S
  for c in 16 32 64; do bb ce$c-$rep-gemm-rs-w4 gemm-rs --world 4 $S --engine-chunk $c; done
done
bb sm-a-gemm-ar-w4 gemm-ar --world 4 $S
bb ce32-a-gemm-ar-w4 gemm-ar --world 4 $S --engine-chunk 32
python3 $H/ab.py $L | tee $L/ab.txt
pack
