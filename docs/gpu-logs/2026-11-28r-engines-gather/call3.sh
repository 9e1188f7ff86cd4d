# Session 18, call 3 (4x H200): the copy engines moving AllGather + GEMM's shard inside the node
# (--engines true, working tree after 07e9e32): gpu_ag_gemm copy_engines_gather (1 x 2, 2 x 1)
# and copy_engines_gather_four_gpus (1 x 4, 2 x 2); then bench ag-gemm, push CTAs (default)
# against the copy engines, device barrier, interleaved twice, at 1 x 4, 1 x 2 and 2 x 2.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
MKERNEL_REQUIRE_GPUS=2 CUDA_VISIBLE_DEVICES=0,1 t gpu_ag_gemm 170 copy_engines_gather --exact
MKERNEL_REQUIRE_GPUS=4 t gpu_ag_gemm 200 copy_engines_gather_four_gpus
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 90 two_ranks_sharing_one_gpu
bb() { local tag=$1; shift; timeout 120 "$@" --device-barrier --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
two() { CUDA_VISIBLE_DEVICES=0,1 "$@"; }
for rep in a b; do
  bb n1w4-sm-$rep $M bench ag-gemm --world 4
  bb n1w4-ce-$rep $M bench ag-gemm --world 4 --engines true
  two bb n1w2-sm-$rep $M bench ag-gemm --world 2
  two bb n1w2-ce-$rep $M bench ag-gemm --world 2 --engines true
  bb n2w4-sm-$rep $M bench ag-gemm --world 4 --nodes 2
  bb n2w4-ce-$rep $M bench ag-gemm --world 4 --nodes 2 --engines true
done
python3 - > $L/ab.txt <<'P'
import json,glob,os,collections
R=collections.defaultdict(list)
for f in sorted(glob.glob('/tmp/logs/n*-*-*.jsonl')):
    lay,v,rep=os.path.basename(f)[:-6].split('-')
    for l in open(f):
        x=json.loads(l); R[(lay,x['shape'],v,x['impl'])].append(x)
for (lay,sh,v,imp),xs in sorted(R.items()):
    if imp not in ('mkernel-fused','ag-alone-fused-split','gemm-alone'): continue
    m,n,k=map(int,sh.split('x'))
    out=[]
    for x in xs:
        s=f"{x['ms']:.4f}"
        if imp=='mkernel-fused': s+=f" ov {x.get('overlap_efficiency',0):.3f} vm {x.get('overlap_vs_model') or 0:.3f}"
        if imp=='ag-alone-fused-split':
            w={'n1w4':4,'n1w2':2,'n2w4':4}[lay]; s+=f" {m*k*2*(w-1)/w/x['ms']/1e6:.0f}GB/s"
        out.append(s)
    print(lay, sh, v, imp, ' | '.join(out))
P
pack
cat $L/ab.txt
