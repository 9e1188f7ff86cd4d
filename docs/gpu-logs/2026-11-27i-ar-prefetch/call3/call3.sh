# Session 9, call 3 (2x H200): the prefetching defaults (world 2: owners pull, send tiles
# prefetch, for the reduce-scatter and the all-reduce). The whole gpu_gemm_rs suite; the
# figures of record of GEMM + RS / AR beside torch_baselines.py multi; the all-reduce pushing
# (the old default) in the same call; a control without the all-reduce's second phase
# (mkernel-noar2, wrong results) against the default, interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
timeout 330 $H/bin/test-gpu_gemm_rs --test-threads 1 > $OUT/test-gpu_gemm_rs.log 2>&1; stamp "test gpu_gemm_rs rc=$?"
grep -E '^test |test result' $OUT/test-gpu_gemm_rs.log | sed 's/\[rank.*//' | tail -14
unset MKERNEL_REQUIRE_GPU
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
bb gemm-rs-w2-n1 gemm-rs --world 2 --nodes 1
bb gemm-ar-w2-n1 gemm-ar --world 2 --nodes 1
bb push-gemm-ar-w2-n1 gemm-ar --world 2 --nodes 1 --push on
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
mkdir -p $L/ctl
S="--shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192"
for i in 1 2; do for b in mkernel mkernel-noar2; do
  timeout 60 $H/bin/$b bench gemm-ar --world 2 $S --json $L/ctl/$b-$i.jsonl > $L/ctl/$b-$i.log 2>&1; stamp "ctl $b $i rc=$?"
done; done
python3 $H/summarize-fused.py $L 2>&1 | tail -30
python3 $H/summarize-fused.py $L push- 2>&1 | tail -10
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/ctl/*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(18), '  '.join(f"{s} {v['mkernel-fused']:.3f}/{v['gemm-alone']:.3f}={v['mkernel-fused']/v['gemm-alone']:.3f}" for s,v in R.items()))
PY
pack
