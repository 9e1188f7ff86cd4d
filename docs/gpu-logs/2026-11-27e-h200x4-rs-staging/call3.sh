# Call 3 (x4): GEMM + RS's helper arrives `ready` of a tile before `free` of the previous one
# (the consumers' parity waits stay within one phase); gpu_gemm_rs and gpu_ag_gemm (b36f79b's
# side-thread epoch, never run on a GPU before); RS / AR at 1 x 4 against b36f79b's binary.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local bin=$1 tag=$1${2:+-$2}; shift 2; timeout 330 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1 m=$2; shift 2; timeout 100 $H/bin/$m bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
bb rs-w4-old mkernel-old gemm-rs --world 4 --nodes 1 $S
bb rs-w4-new mkernel gemm-rs --world 4 --nodes 1 $S
bb ar-w4-old mkernel-old gemm-ar --world 4 --nodes 1 $S
bb ar-w4-new mkernel gemm-ar --world 4 --nodes 1 $S
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    d={}
    for l in open(f):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r
    print(os.path.basename(f)[:-6].ljust(12), ' '.join(f"{v['mkernel-fused']['ms']:.3f}/{v['mkernel-unfused']['ms']:.3f}/{v['gemm-alone']['ms']:.3f}" for s,v in d.items()))
PY
t gpu_gemm_rs all
t gpu_ag_gemm all
pack
