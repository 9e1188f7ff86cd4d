# Session 16, call 4 (4x H200): the copy engines' copies on a stream per peer (enqueued chunk by
# chunk across them) against one stream (mkernel-one, call 3's code) and SM pushes; the test
# call 3's outer timeout cut (two_nodes_of_two_ranks_sharing_one_gpu) and engine_copies again.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
timeout 120 $H/bin/test-gpu_gemm_rs --test-threads 1 engine_copies > $L/engine-test.log 2>&1
stamp "engine test rc=$? $(grep 'test result' $L/engine-test.log)"
bb() { local tag=$1 bin=$2; shift 2; timeout 60 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
if grep -q 'test result: ok' $L/engine-test.log; then
  for rep in a b; do
    bb sm-$rep-gemm-rs-w4 mkernel gemm-rs --world 4 $S
    bb ce32-$rep-gemm-rs-w4 mkernel gemm-rs --world 4 $S --engine-chunk 32
    bb ce128-$rep-gemm-rs-w4 mkernel gemm-rs --world 4 $S --engine-chunk 128
    bb one32-$rep-gemm-rs-w4 mkernel-one gemm-rs --world 4 $S --engine-chunk 32
  done
fi
python3 $H/ab.py $L | tee $L/ab.txt
timeout 100 $H/bin/test-gpu_gemm_rs --test-threads 1 two_nodes_of_two_ranks_sharing_one_gpu > $L/two-nodes-test.log 2>&1
stamp "two nodes test rc=$? $(grep 'test result' $L/two-nodes-test.log)"
pack
