# Call 1 (x4): spread copies (the compute CTAs' spare thread copies the shard; no push CTAs)
# against push CTAs at 1 x 4, interleaved twice, tail on/off; 2 x 2 once; the all-gather and the
# copy engine's at-once all-gather; gpu_ag_gemm with the spread cases.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 330 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
bb smoke-spread ag-gemm --world 4 --nodes 1 --shapes 8192x4096x4096 --spread true
for r in 1 2; do
  bb push-$r ag-gemm --world 4 --nodes 1 --shapes $S
  bb spread-$r ag-gemm --world 4 --nodes 1 --shapes $S --spread true
  bb spread-notail-$r ag-gemm --world 4 --nodes 1 --shapes $S --spread true --tail-split false
done
bb spread-u256k ag-gemm --world 4 --nodes 1 --shapes $S --spread true --spread-unit 262144
bb n2-push ag-gemm --world 4 --nodes 2 --shapes $S
bb n2-spread ag-gemm --world 4 --nodes 2 --shapes $S --spread true
bb agx-w4 allgather --world 4 --sizes 256M
t gpu_ag_gemm
for f in $L/push-*.log $L/spread*.log $L/n2-*.log $L/smoke*.log; do echo "$(basename $f .log): $(grep -hE 'overlap eff' $f | grep -v 'rank [123]' | sed 's/.*efficiency *//' | cut -c1-6 | tr '\n' ' ') | $(grep -hE 'vs modelled' $f | sed 's/.*inter-node *//' | cut -c1-6 | tr '\n' ' ')"; done
grep -hE "copy-engine|mkernel" $L/agx-w4.log | head -12
pack
