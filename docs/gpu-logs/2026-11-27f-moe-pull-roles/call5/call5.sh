# Call 5 (2x H200: x4 no longer lent): call 4's code with the launch epoch shared with every role (only thread 0 had it:
# call 4's writers raised xready at epoch 0 and every test timed out). One test first, then the
# rest and the bench only if it passes.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 60 $H/bin/test-gpu_moe --test-threads 1 one_node_two_gpus > $L/test-gpu_moe-2.log 2>&1; rc=$?; stamp "gpu_moe two rc=$rc"
grep -E "test result|timed out" $L/test-gpu_moe-2.log | tail -4
if [ $rc = 0 ]; then
bb() { local bin=$1 tag=$2; shift 2; timeout 40 $bin bench moe --world 2 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
bb $O ds-old-8-16 $DS --pull-ctas 8 --run-records 16
for k in "16 5 2" "12 8 2" "8 16 2" "8 16 4"; do
  set -- $k; bb $M ds-$1-$2-q$3 $DS --pull-ctas $1 --run-records $2 --queue $3
done
bb $O mx-old-8-16 $MX --pull-ctas 8 --run-records 16
for k in "8 16 2" "4 32 4"; do
  set -- $k; bb $M mx-$1-$2-q$3 $MX --pull-ctas $1 --run-records $2 --queue $3
done
python3 - <<'PY'
import json, glob, os
rows={}
for f in sorted(glob.glob('/tmp/logs/*.jsonl'), key=os.path.getmtime):
    for l in open(f):
        r=json.loads(l)
        rows.setdefault(os.path.basename(f)[:-6],{})[r['impl']]=r['ms']
print('tag'.ljust(16), 'fused', 'gemm', 'disp')
for t,v in rows.items(): print(t.ljust(16), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone')))
PY
MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-gpu_moe --test-threads 1 > $L/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "test result|timed out" $L/test-gpu_moe.log | tail -4
fi
pack
