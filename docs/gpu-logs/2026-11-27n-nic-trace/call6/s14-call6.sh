# Session 14, call 6 (2x H200): the GEMM engine's traps (and the all-gather's entering launch)
# through `sync::stop` (the report whole before the context stops): gpu_selftest, gpu_gemm,
# gpu_comm's absent-rank case; the plain GEMM on the seven shapes against cuBLAS, HEAD's binary
# (old) and this one (new) interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; timeout 200 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S7="--shapes 8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192"
for rep in a b; do
  CUDA_VISIBLE_DEVICES=0 bb gemm-old-$rep $H/bin/mkernel-old bench gemm $S7
  CUDA_VISIBLE_DEVICES=0 bb gemm-new-$rep $H/bin/mkernel bench gemm $S7
done
for t in gpu_selftest gpu_gemm; do
  MKERNEL_REQUIRE_GPUS=2 timeout 300 $H/bin/test-$t --test-threads 1 > $L/$t.log 2>&1
  stamp "$t rc=$? $(grep 'test result' $L/$t.log)"
done
MKERNEL_REQUIRE_GPUS=2 timeout 100 $H/bin/test-gpu_comm allgather_absent_rank_is_reported --nocapture > $L/gpu_comm-absent.log 2>&1
stamp "gpu_comm absent rc=$? $(grep 'test result' $L/gpu_comm-absent.log)"
python3 - $L <<'PY' | tee $L/ab.txt
import json,glob,sys,collections
rows=collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1]+'/gemm-*.jsonl')):
    tag=f.split('/')[-1][:-6].rsplit('-',1)[0]
    for l in open(f):
        r=json.loads(l); rows[(r['shape'],r.get('layout'),r['impl'])].append((tag, round(r['ms'],4)))
for k in sorted(rows): print(k, rows[k])
PY
pack
