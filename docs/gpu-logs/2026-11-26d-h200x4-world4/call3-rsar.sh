# GEMM + RS / AR experiments at world 4 (sourced by call3.sh): the lead at 1 x 4, one shot for
# the all-reduce, and inter-reduce CTAs x group x inter-send at 2 x 2.
SH="16384x8192x8192,16384x4096x8192"
x() { local tag=$1; shift; timeout 40 $M bench "$@" --shapes $SH --json $L/x-$tag.jsonl > $L/x-$tag.log 2>&1; echo "$tag rc=$? $(python3 -c "
import json,sys
for l in open('$L/x-$tag.jsonl'):
    d=json.loads(l)
    if d['impl'] in ('mkernel-fused','gemm-alone'): print(d['shape'], d['impl'][:6], round(d['ms'],3), end='; ')
")" | tee -a $L/x-summary.txt; }
for op in gemm-rs gemm-ar; do
  x $op-n1-def $op --world 4 --nodes 1
  x $op-n1-lead0 $op --world 4 --nodes 1 --lead 0
  x $op-n1-lead1 $op --world 4 --nodes 1 --lead 1
  x $op-n1-leadall $op --world 4 --nodes 1 --lead all
done
x gemm-ar-n1-oneshot gemm-ar --world 4 --nodes 1 --one-shot true
for op in gemm-rs gemm-ar; do
  x $op-n2-def $op --world 4 --nodes 2
  x $op-n2-ir64 $op --world 4 --nodes 2 --inter-reduce 64
  x $op-n2-g32 $op --world 4 --nodes 2 --group 32
  x $op-n2-is2 $op --world 4 --nodes 2 --inter-send 2
  x $op-n2-ir8 $op --world 4 --nodes 2 --inter-reduce 8
done
