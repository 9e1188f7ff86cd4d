# Call 8 (x4): the diagnostic build (push CTAs copy nothing) with 1 / 2 / 4 / 6 push CTAs at
# 16384x4096x8192, 1 x 4, tail on and off, interleaved twice: at 131 compute CTAs 2048 tiles take
# 16 waves as the plain GEMM's 132 do, so what remains there is the fused engine's own cost.
source "$(dirname "$0")/prep.sh"
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for r in 1 2; do
  for p in 1 2 4 6; do
    for t in true false; do
      bb mkernel-diag diag-p$p-tail$t-$r ag-gemm --world 4 --nodes 1 --shapes 16384x4096x8192 --push-ctas $p --tail-split $t
    done
  done
done
for f in $L/diag-*.log; do echo "$(basename $f .log): $(grep -hE 'overlap eff' $f | grep -v 'rank [123]' | sed 's/.*efficiency *//' | cut -c1-60 | tr '\n' ' ')"; done
pack
