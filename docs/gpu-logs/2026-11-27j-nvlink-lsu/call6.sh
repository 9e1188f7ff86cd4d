# Session 10, call 6 (2x H200): does the host barrier's spread show in the MoE (whose layout waits
# for every peer's counts before any tile) and in GEMM + AR / RS at world 2? Each bench with the
# host barrier and with --device-barrier, interleaved (MoE twice).
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 120 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in 1 2; do
  bb moe-host-r$rep moe --world 2; bb moe-dev-r$rep moe --world 2 --device-barrier
done
for op in gemm-rs gemm-ar; do bb $op-host $op --world 2 --shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192; bb $op-dev $op --world 2 --shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192 --device-barrier; done
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    rs=[json.loads(l) for l in open(f)]
    by={}
    for r in rs: by.setdefault(r['shape'],{})[r['impl']]=r['ms']
    for sh,v in by.items():
        base=v.get('gemm-alone'); d=v.get('dispatch-alone')
        ideal=max(base,d) if d else base
        print(os.path.basename(f)[:-6].ljust(14), sh.ljust(30), ' '.join(f"{k}={t:.3f}" for k,t in v.items()), 'fused/ideal=%.3f'%(v['mkernel-fused']/ideal))
PY
pack
