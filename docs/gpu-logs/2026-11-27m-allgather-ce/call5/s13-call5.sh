# Session 13, call 5 (4x H200): every forward CTA copies its piece of each arriving chunk (new,
# working tree after 797a091) against 797a091 (one CTA per chunk, `mkernel-old`), AllGather + GEMM
# at 2 x 2 on the four large shapes, with 2 (default) and 4 forward CTAs, interleaved twice; then
# gpu_ag_gemm on 4 GPUs (a new 2 x 2 case: 3 forward CTAs, 48-row chunks, 20 back to back, graph).
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--world 4 --nodes 2 --shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb f-old-f2-$rep $H/bin/mkernel-old bench ag-gemm $S
  bb f-new-f2-$rep $H/bin/mkernel bench ag-gemm $S
  bb f-old-f4-$rep $H/bin/mkernel-old bench ag-gemm $S --fwd-ctas 4
  bb f-new-f4-$rep $H/bin/mkernel bench ag-gemm $S --fwd-ctas 4
done
python3 - $L <<'PY' | tee $L/f.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/f-*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l)
        if r['impl']=='mkernel-fused': rows[(r['shape'],tag,'fused/model')].append(round(r['overlap_vs_model'],3))
        if r['impl']=='ag-alone-fused-split': rows[(r['shape'],tag,'comm-only ms')].append(round(r['ms'],3))
for k in sorted(rows): print(k, rows[k])
PY
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
timeout 260 $H/bin/test-gpu_ag_gemm --test-threads=1 > $L/gpu_ag_gemm.log 2>&1; stamp "gpu_ag_gemm rc=$? $(grep -h '^test result' $L/gpu_ag_gemm.log | tail -1 | cut -c1-90)"
pack
