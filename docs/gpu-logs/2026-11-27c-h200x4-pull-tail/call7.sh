# Call 7 (x4): where the rest of AllGather + GEMM's one-node gap lies. A diagnostic build
# (mkernel-diag, wrong results by design) whose push CTAs copy nothing and only raise the
# arrival flags: the fused kernel's structure (126 compute CTAs, the tail, the flag waits, the
# tiles' local copy) without the NVLink traffic; against the real one, tail on and off, at 1 x 4,
# interleaved twice.
source "$(dirname "$0")/prep.sh"
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S=16384x8192x8192,16384x4096x8192,32768x4096x8192
for r in 1 2; do
  for t in true false; do
    bb mkernel real-tail$t-$r ag-gemm --world 4 --nodes 1 --shapes $S --tail-split $t
    bb mkernel-diag diag-tail$t-$r ag-gemm --world 4 --nodes 1 --shapes $S --tail-split $t
  done
done
for f in $L/*-tail*.log; do echo "$(basename $f .log): $(grep -hE 'overlap eff' $f | grep -v 'rank [123]' | sed 's/.*efficiency *//' | cut -c1-8 | tr '\n' ' ')"; done
pack
