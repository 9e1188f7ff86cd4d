# Call 4 (x4): MoE late helpers (the last N compute CTAs move rows until the tile where they join
# the walk at P thousandths): DeepSeek-like and Mixtral-like at 1 x 4, against the default,
# interleaved; then gpu_moe late_helpers.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift 2; timeout 300 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1; shift; timeout 120 $M bench moe --world 4 --nodes 1 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
DS="--configs 4096x7168x2048x256x8"
for r in 1 2; do
  bb ds-base-$r $DS
  bb ds-l24-500-$r $DS --late-helpers 24 --join-permille 500
  bb ds-l32-700-$r $DS --late-helpers 32 --join-permille 700
  bb ds-l48-500-$r $DS --late-helpers 48 --join-permille 500
done
bb ds-l16-500 $DS --late-helpers 16 --join-permille 500
bb ds-l24-300 $DS --late-helpers 24 --join-permille 300
bb ds-l64-600 $DS --late-helpers 64 --join-permille 600
MX="--configs 8192x4096x14336x8x2"
bb mx-base $MX
bb mx-l24-500 $MX --late-helpers 24 --join-permille 500
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r
    for s,v in d.items():
        g=lambda k: v[k]['ms'] if k in v else float('nan')
        print(os.path.basename(f)[:-6].ljust(14), f"fused {g('mkernel-fused'):.3f} unfused {g('mkernel-unfused'):.3f} gemm {g('gemm-alone'):.3f} dispatch {g('dispatch-alone'):.3f} fused/gemm {g('mkernel-fused')/g('gemm-alone'):.3f}")
PY
t gpu_moe late late_helpers
pack
