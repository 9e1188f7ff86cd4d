# Call 1 (x4): the MoE's streaming pull (each moving CTA's ring stays full across slots of staged
# records). gpu_moe first (every layout up to 1 x 4 and 2 x 2), then `tune moe` at 1 x 4 for
# both configs over pull CTAs x runs, then the old binary (b36f79b, same MoE code as d126678) at
# the table's lines beside the new one, and torch_baselines.py moe.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; O=$H/bin/mkernel-old
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 200 $H/bin/test-gpu_moe --test-threads 1 > $L/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "^test |test result" $L/test-gpu_moe.log | tail -20
timeout 120 $M tune moe --world 4 --nodes 1 --configs 4096x7168x2048x256x8 --pull-ctas 8,12,16,24 --run-records 5,8,16,32 --rounds 2 --out $L/tune-ds.jsonl > $L/tune-ds.log 2>&1; stamp "tune ds rc=$?"
timeout 120 $M tune moe --world 4 --nodes 1 --configs 8192x4096x14336x8x2 --pull-ctas 4,8,12,16 --run-records 8,16,32,64 --rounds 2 --out $L/tune-mx.jsonl > $L/tune-mx.log 2>&1; stamp "tune mx rc=$?"
bb() { local bin=$1 tag=$2; shift 2; timeout 100 $bin bench moe --world 4 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
DS="--configs 4096x7168x2048x256x8 --pull-ctas 24 --run-records 5"
MX="--configs 8192x4096x14336x8x2 --pull-ctas 8 --run-records 16"
bb $O ds-old $DS; bb $M ds-new $DS; bb $O mx-old $MX; bb $M mx-new $MX
PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe rc=$?"
python3 - <<'PY'
import re, json, glob, os
for f in ('/tmp/logs/tune-ds.log', '/tmp/logs/tune-mx.log'):
    pts={}
    for l in open(f):
        m=re.search(r'tune moe (\S+) pull (\d+) run (\d+) round (\d+): fused ([\d.]+)', l)
        if m: pts.setdefault((int(m[2]),int(m[3])),[]).append(float(m[5]))
    print(os.path.basename(f)); [print(' ', k, ' '.join(f'{x:.3f}' for x in v)) for k,v in sorted(pts.items())]
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    if 'tune' in f: continue
    for l in open(f):
        r=json.loads(l)
        if 'torch' in f: print('torch', {k:r[k] for k in r if k in ('config','impl','ms')}); continue
        if r['impl'] in ('mkernel-fused','gemm-alone','dispatch-alone'):
            print(os.path.basename(f)[:-6].ljust(10), r['shape'][:24].ljust(24), r['impl'].ljust(15), f"{r['ms']:.3f}", r.get('pull_ctas'), r.get('run_records'))
PY
pack
