# Session 21, call 8 (4x H200): an experiment on GEMM + ReduceScatter's first waves. Call 7's
# timelines: the fused launch's tiles at positions 1-3 run 43 / 33 / 27 us against the GEMM
# alone's 22-25, while the first wave's 264 half-tile sends leave together (25 us each, against
# 10-12 later). mkernel-stagger (MK_STAGGER_NS=2500, trace build) delays the sends of each CTA's
# first two tiles by (CTA % 8) x 2.5 us; mkernel-trace is the same code without. Interleaved.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for rep in 1 2; do for v in trace stagger; do for s in 16384x4096x8192 16384x8192x8192; do
  timeout 40 $H/bin/mkernel-$v bench gemm-rs --world 4 --shapes $s --trace $L/$v-$rep-$s --trace-epochs 20,1 --json $L/$v-$rep-$s.jsonl > $L/$v-$rep-$s.log 2>&1; stamp "$v $rep $s rc=$?"
done; done; done
( export CUDA_VISIBLE_DEVICES=0,1
  for v in trace stagger; do s=16384x4096x8192
  timeout 40 $H/bin/mkernel-$v bench gemm-rs --world 2 --shapes $s --trace $L/$v-w2-$s --trace-epochs 20,1 --json $L/$v-w2-$s.jsonl > $L/$v-w2-$s.log 2>&1; stamp "$v w2 $s rc=$?"; done )
gzip -9 $L/*.rank*.jsonl
pack
cat $L/stamps.txt
for f in $L/*.jsonl; do python3 -c "
import json,sys
r={}
for l in open('$f'):
  x=json.loads(l); r[x['impl']]=x['ms']
print('%-36s fused %.4f gemm %.4f ratio %.3f'%('$f'.split('/')[-1], r['mkernel-fused'], r['gemm-alone'], r['mkernel-fused']/r['gemm-alone']))"; done
