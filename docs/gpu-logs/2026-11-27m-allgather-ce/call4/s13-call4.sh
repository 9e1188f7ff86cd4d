# Session 13, call 4 (4x H200), 797a091: AllGather + GEMM at 2 x 2, 16384x4096x8192: knobs that
# give the GEMM more of the SMs (spread copies from the compute CTAs' spare warps, fewer push
# CTAs: 16 waves of tiles need >= 128 compute CTAs), more forward CTAs, a static walk with its
# tail cut stream-K; interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--world 4 --nodes 2 --shapes 16384x4096x8192"
for rep in a b; do
  bb k-def-$rep $M bench ag-gemm $S
  bb k-spread-$rep $M bench ag-gemm $S --spread true
  bb k-spread-p1-$rep $M bench ag-gemm $S --spread true --push-ctas 1
  bb k-spread-p2f1-$rep $M bench ag-gemm $S --spread true --push-ctas 2 --fwd-ctas 1
  bb k-spread-p1-r128-$rep $M bench ag-gemm $S --spread true --push-ctas 1 --chunk-rows 128
  bb k-f4-$rep $M bench ag-gemm $S --fwd-ctas 4
  bb k-static-tail-$rep $M bench ag-gemm $S --dynamic false --tail-split true
  bb k-p6-$rep $M bench ag-gemm $S --push-ctas 6
done
python3 - $L <<'PY' | tee $L/k.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/k-*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l)
        if r['impl'] in ('mkernel-fused','ag-alone-fused-split','gemm-alone'):
            rows[tag].append((r['impl'][:12], round(r['ms'],3), round(r.get('overlap_vs_model',0),3) if r['impl']=='mkernel-fused' else '', r.get('compute_ctas'), r.get('push_ctas'), r.get('fwd_ctas'), r.get('spread'), r.get('chunk_rows'), r.get('tail_tiles')))
for k in sorted(rows): print(k, rows[k])
PY
pack
