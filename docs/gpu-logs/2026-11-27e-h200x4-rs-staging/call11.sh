# Call 11 (x4): the MoE's new world-4 line for the DeepSeek-like config (24 pull CTAs, runs of 5,
# from calls 8-10) against the old one (8 / 16), interleaved twice, beside torch_baselines.py moe;
# a rank-check of the DeepSeek-like config at 1 x 4 with the new defaults.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 100 $M bench moe --world 4 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
DS="--configs 4096x7168x2048x256x8"
for i in 1 2; do
  bb moe-w4-n1-new-$i
  bb moe-ds-old-$i $DS --pull-ctas 8 --run-records 16
done
PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe rc=$?"
timeout 80 $M launch -n 4 -- $M rank-check moe --config 4096x7168x2048x256x8 --rounds 1 > $L/check-ds.log 2>&1; stamp "rank-check ds rc=$?"
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    for l in open(f):
        r=json.loads(l)
        if 'torch' in f: print('torch', {k:r[k] for k in r if k in ('config','impl','ms','tflops','shape')}); continue
        if r['impl'] in ('mkernel-fused','gemm-alone','dispatch-alone'):
            print(os.path.basename(f)[:-6].ljust(18), r['shape'][:24].ljust(24), r['impl'].ljust(15), f"{r['ms']:.3f}", r.get('pull_ctas'), r.get('run_records'))
PY
tail -2 $L/check-ds.log
pack
