# Call 6 (x4): AllGather + GEMM on a static walk the push CTAs join late (sched::TileIter::joined,
# --join true --join-wave K): gpu_ag_gemm whole (new cases at 1 x 2 and 1 x 4), then an A/B at
# 1 x 4 on the two shapes that miss 1.05, interleaved twice: static (default), joined at the
# modelled wave, joined at two earlier waves, drawn tiles with join.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 300 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
b() { local tag=$1; shift; timeout 100 $M bench ag-gemm --world 4 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for r in 1 2; do
  for s in 16384x4096x8192:8:10 32768x4096x8192:16:20; do
    IFS=: read sh k1 k2 <<< "$s"
    b ag-$sh-static-$r --shapes $sh
    b ag-$sh-jmodel-$r --shapes $sh --join true
    b ag-$sh-j$k1-$r --shapes $sh --join true --join-wave $k1
    b ag-$sh-j$k2-$r --shapes $sh --join true --join-wave $k2
    b ag-$sh-dyn-$r --shapes $sh --dynamic true
  done
  b ag-16384x4096x8192-p8j8-$r --shapes 16384x4096x8192 --push-ctas 8 --join true --join-wave 8
done
t gpu_ag_gemm
for f in $L/ag-*.log; do echo "$(basename $f .log): $(grep -h 'overlap eff' $f | grep -v 'rank [123]' | sed 's/.*efficiency \([0-9.]*\).*/\1/' | tr '\n' ' ')"; done
pack
