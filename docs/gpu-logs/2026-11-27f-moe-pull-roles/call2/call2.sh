# Call 2 (x4): the streaming pull, second form: a stager takes an item only once a slot is free
# (helpers stage 2 slots ahead, pull CTAs `--queue`), loads 10 pieces ahead of the stores.
# gpu_moe, then bench moe at 1 x 4 over pull CTAs x runs x queue beside the old binary.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 200 $H/bin/test-gpu_moe --test-threads 1 > $L/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "test result|FAIL|panicked" $L/test-gpu_moe.log | tail -5
bb() { local bin=$1 tag=$2; shift 2; timeout 60 $bin bench moe --world 4 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8"; MX="--configs 8192x4096x14336x8x2"
bb $O ds-old-24-5 $DS --pull-ctas 24 --run-records 5
for k in "24 5 4" "24 5 2" "24 5 8" "16 8 4" "16 16 4" "12 16 4" "12 32 8" "8 16 4" "8 32 8"; do
  set -- $k; bb $M ds-$1-$2-q$3 $DS --pull-ctas $1 --run-records $2 --queue $3
done
bb $O mx-old-8-16 $MX --pull-ctas 8 --run-records 16
for k in "8 16 4" "8 16 8" "8 32 2" "16 16 4" "4 32 4"; do
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
pack
