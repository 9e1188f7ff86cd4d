# Call 2 (x4): the helpers give the staging tile back once their bulk copies have read it
# (pushed partials), against the previous binary (mkernel-old = b36f79b), interleaved twice:
# GEMM + RS / AR at 1 x 4, the AR at world 2 and 2 x 2; our kernel with K/W = 64 (the
# communication with almost no GEMM); then gpu_gemm_rs.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift 2; timeout 400 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1 m=$2; shift 2; timeout 100 $H/bin/$m bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
K="--shapes 16384x8192x256,16384x4096x256,32768x4096x256,8192x8192x256"
for i in 1 2; do
  bb rs-w4-old-$i mkernel-old gemm-rs --world 4 --nodes 1 $S
  bb rs-w4-new-$i mkernel gemm-rs --world 4 --nodes 1 $S
  bb ar-w4-old-$i mkernel-old gemm-ar --world 4 --nodes 1 $S
  bb ar-w4-new-$i mkernel gemm-ar --world 4 --nodes 1 $S
done
bb rs-w4-k64-old mkernel-old gemm-rs --world 4 --nodes 1 $K
bb rs-w4-k64-new mkernel gemm-rs --world 4 --nodes 1 $K
bb ar-w4-k64-new mkernel gemm-ar --world 4 --nodes 1 $K
bb ar-w4-n2-old mkernel-old gemm-ar --world 4 --nodes 2 $S
bb ar-w4-n2-new mkernel gemm-ar --world 4 --nodes 2 $S
export CUDA_VISIBLE_DEVICES=0,1
bb ar-w2-old mkernel-old gemm-ar --world 2 --nodes 1 $S
bb ar-w2-new mkernel gemm-ar --world 2 --nodes 1 $S
bb rs-w2-push-old mkernel-old gemm-rs --world 2 --nodes 1 $S --push on
bb rs-w2-push-new mkernel gemm-rs --world 2 --nodes 1 $S --push on
unset CUDA_VISIBLE_DEVICES
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r
    cells=[]
    for s,v in d.items():
        x=v.get('mkernel-fused')
        if x: cells.append(f"{x['ms']:.3f}/{x.get('fused_over_gemm',0):.3f}/{x.get('overlap_vs_model') or 0:.3f}")
    print(os.path.basename(f)[:-6].ljust(15), ' '.join(cells))
PY
t gpu_gemm_rs all
pack
