# Session 10, call 3 (4x H200): how much of our timed gaps is the host barrier's release spread?
# Each bench twice, interleaved: host barrier (as every figure so far) and --device-barrier (a
# 16-byte all-gather queued after the host barrier lines the GPUs up before the timed work).
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
ag() { local tag=$1; shift; timeout 60 $M bench allgather --sizes 256M "$@" > $L/$tag.log 2>&1; echo "$tag rc=$? $(grep -E 'mkernel|copy-engine' $L/$tag.log | awk "{print \$(NF-4), \$(NF-1)}" | tr '\n' ' ')" | tee -a $L/sweep.txt; }
for rep in 1 2; do
  for c in "fan --intra-ctas 16" "lsu --intra-ctas 64" "lsu --intra-ctas 32"; do
    t=$(echo $c | tr -d ' -'); ag w4-$t-host-r$rep --world 4 --copy $c; ag w4-$t-dev-r$rep --world 4 --copy $c --device-barrier
  done
done
export CUDA_VISIBLE_DEVICES=0,1
for c in "bulk --intra-ctas 16" "lsu --intra-ctas 64"; do
  t=$(echo $c | tr -d ' -'); ag w2-$t-host --world 2 --copy $c; ag w2-$t-dev --world 2 --copy $c --device-barrier
done
unset CUDA_VISIBLE_DEVICES
stamp allgather
bb() { local tag=$1; shift; timeout 150 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
bb gemm-rs-w4-n1 gemm-rs --world 4 --nodes 1
bb gemm-rs-w4-n1-dev gemm-rs --world 4 --nodes 1 --device-barrier
bb gemm-ar-w4-n1 gemm-ar --world 4 --nodes 1
bb gemm-ar-w4-n1-dev gemm-ar --world 4 --nodes 1 --device-barrier
bb ag-w4-n1 ag-gemm --world 4 --nodes 1
bb ag-w4-n1-dev ag-gemm --world 4 --nodes 1 --device-barrier
cat $L/sweep.txt
for f in $L/gemm-r*-w4-n1*.jsonl $L/ag-w4-n1*.jsonl; do echo "== $(basename $f)"; python3 -c "
import json,sys
rs=[json.loads(l) for l in open('$f')]
by={}
for r in rs: by.setdefault((r['shape'],r['layout']),{})[r['impl']]=r['ms']
for k,v in by.items(): print(k, ' '.join(f'{i}={t:.3f}' for i,t in v.items()), 'fused/gemm=%.3f'%(v['mkernel-fused']/v['gemm-alone']))
"; done
pack
