# Session 18, call 2 (4x H200), 07e9e32: (1) figures of record for AllGather + GEMM beside
# torch_baselines.py multi, at 1 x 4, 2 x 2, 1 x 2 and 2 x 1, each after the host barrier and
# after the device barrier (--device-barrier), twice; (2) what the fused kernel's own gather can
# move at 1 x 4 (its comm-only launch with more push CTAs) against the copy engines' all-gather.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 120 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
two() { CUDA_VISIBLE_DEVICES=0,1 "$@"; }
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
two env PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
for rep in a b; do
  for bar in host dev; do
    X=""; [ $bar = dev ] && X="--device-barrier"
    bb $bar$rep-ag-w4-n1 $M bench ag-gemm --world 4 $X
    bb $bar$rep-ag-w4-n2 $M bench ag-gemm --world 4 --nodes 2 $X
    two bb $bar$rep-ag-w2-n1 $M bench ag-gemm --world 2 $X
    two bb $bar$rep-ag-w2-n2 $M bench ag-gemm --world 2 --nodes 2 $X
  done
done
for p in hosta hostb deva devb; do cp $L/torch-multi-w4.jsonl $L/$p-torch-multi-w4.jsonl; cp $L/torch-multi-w2.jsonl $L/$p-torch-multi-w2.jsonl; done
for p in hosta hostb deva devb; do echo "=== $p"; python3 $H/summarize-fused.py $L $p-; done > $L/fused.txt 2>&1
# (2) the gather's capacity: comm-only at 1 x 4 with more push CTAs, no spread
S2="--shapes 16384x4096x8192,32768x4096x8192"
for rep in a b; do
  bb cap$rep-def $M bench ag-gemm --world 4 $S2 --device-barrier
  for pc in 16 32 64; do bb cap$rep-p$pc $M bench ag-gemm --world 4 $S2 --push-ctas $pc --spread false --device-barrier; done
  bb cap$rep-p32fan $M bench ag-gemm --world 4 $S2 --push-ctas 32 --fan --spread false --device-barrier
  bb cap$rep-ce $M bench allgather --world 4 --sizes 256M,512M --copy ce --device-barrier
done
python3 - > $L/cap.txt <<'P'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/cap*.jsonl')):
    for l in open(f):
        x=json.loads(l); tag=os.path.basename(f)[:-6]
        if x['impl'] in ('ag-alone-fused-split','mkernel-fused'):
            m,n,k=map(int,x['shape'].split('x')); by=m*k*2*3/4
            print(tag, x['shape'], x['impl'], round(x['ms'],4), f"{by/x['ms']/1e6:.0f} GB/s (bus)" if 'alone' in x['impl'] else '')
        elif 'gbps' in x:
            print(tag, x['shape'], x['impl'], round(x['ms'],4), round(x['gbps'],1), 'GB/s')
P
pack
cat $L/fused.txt; cat $L/cap.txt
