# Call 5 (x4): AllGather + GEMM with the stream-K tail (sched::TailSplit: tiles past the claiming
# CTAs' last full wave cut into k-ranges over all of them) against every tile whole
# (--no-tail-split), 1 x 4 and 2 x 2, interleaved twice, beside torch multi; gpu_ag_gemm and
# gpu_comm's all-gather tests (pull kept, stepped / mixed removed) on these binaries.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 250 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
for r in 1 2; do
  bb ag-n1-tail-$r ag-gemm --world 4 --nodes 1 --shapes $S
  bb ag-n1-whole-$r ag-gemm --world 4 --nodes 1 --shapes $S --no-tail-split
done
bb ag-n2-tail ag-gemm --world 4 --nodes 2 --shapes $S
bb ag-n2-whole ag-gemm --world 4 --nodes 2 --shapes $S --no-tail-split
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
t gpu_ag_gemm
t gpu_comm allgather
for f in $L/ag-*.log; do echo "$(basename $f .log): $(grep -hE 'overlap eff|time /' $f | grep -v 'rank [123]' | sed 's/.*-> *//' | cut -c1-60 | tr '\n' '|')"; done
pack
