# Call 9 (x4): the final binaries (the tail only where it fills at most 55% of a wave; the copy
# helpers sharing BulkSpan): gpu_ag_gemm, gpu_comm's all-gather tests, gpu_gemm (split-K and
# stream-K share SplitKStore); AllGather + GEMM at 1 x 4 once, to see the defaults' knobs.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 250 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
rm -f $L/*.log $L/*.jsonl
timeout 60 $H/bin/mkernel bench ag-gemm --world 4 --nodes 1 --shapes 16384x4096x8192,32768x4096x8192 --json $L/ag-w4-n1.jsonl > $L/ag-w4-n1.log 2>&1; stamp "ag rc=$?"
grep -hE 'overlap eff' $L/ag-w4-n1.log | grep -v 'rank [123]' | cut -c1-60
t gpu_ag_gemm
t gpu_comm allgather
t gpu_gemm
pack
