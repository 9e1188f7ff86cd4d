# Session 13, call 3 (4x H200), 797a091: where AllGather + GEMM's emulated-node time goes at
# 16384x4096x8192 (2 x 2 and 2 x 1): the fused launch and its communication alone (ag-alone-
# fused-split) against the modelled link, with bigger chunks (fewer FIFO writes and flags), in
# place (no wait for the local copy), more push CTAs; interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x4096x8192"
for rep in a b; do
  bb n2w4-def-$rep $M bench ag-gemm --world 4 --nodes 2 $S
  bb n2w4-r128-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 8 --chunk-rows 128
  bb n2w4-r256-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 8 --chunk-rows 256
  bb n2w4-r512-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 8 --chunk-rows 512
  bb n2w4-ip-$rep $M bench ag-gemm --world 4 --nodes 2 $S --in-place
  bb n2w4-p16-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 16 --chunk-rows 64
  CUDA_VISIBLE_DEVICES=0,1 bb n2w2-def-$rep $M bench ag-gemm --world 2 --nodes 2 $S
  CUDA_VISIBLE_DEVICES=0,1 bb n2w2-r256-$rep $M bench ag-gemm --world 2 --nodes 2 $S --push-ctas 10 --chunk-rows 256
done
python3 - $L <<'PY' | tee $L/n2.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/n2*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l); rows[(tag,r['impl'])].append((round(r['ms'],3), r.get('modelled_inter_node_ms') and round(r['modelled_inter_node_ms'],3), r.get('push_ctas'), r.get('chunk_rows')))
for k in sorted(rows): print(k, rows[k])
PY
pack
