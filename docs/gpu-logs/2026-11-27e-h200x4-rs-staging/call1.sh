# Call 1 (x4): warp pushes. gpu_gemm_rs warp_pushes; A/B of TMA bulk pushes against the helpers'
# whole warps for GEMM + RS (push) and GEMM + AR at 1 x 4 and world 2, interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift 2; timeout 330 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for i in 1 2; do
  bb rs-w4-tma-$i gemm-rs --world 4 --nodes 1 $S
  bb rs-w4-warp-$i gemm-rs --world 4 --nodes 1 $S --warp-push on
  bb ar-w4-tma-$i gemm-ar --world 4 --nodes 1 $S
  bb ar-w4-warp-$i gemm-ar --world 4 --nodes 1 $S --warp-push on
done
export CUDA_VISIBLE_DEVICES=0,1
bb rs-w2-pull gemm-rs --world 2 --nodes 1 $S
bb rs-w2-warp gemm-rs --world 2 --nodes 1 $S --push on --warp-push on
bb rs-w2-tma gemm-rs --world 2 --nodes 1 $S --push on
bb ar-w2-tma gemm-ar --world 2 --nodes 1 $S
bb ar-w2-warp gemm-ar --world 2 --nodes 1 $S --warp-push on
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
        if x: cells.append(f"{x['ms']:.3f}/{x.get('fused_over_gemm',0):.3f}")
    print(os.path.basename(f)[:-6].ljust(14), ' '.join(cells))
PY
t gpu_gemm_rs warp warp_pushes
pack
