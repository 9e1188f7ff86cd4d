# Call 9 (x4): the final binaries (host-counted spread units, no division in the side threads):
# figures of record at the defaults, 1 x 4 (spread) and 2 x 2, push alone beside, torch multi
# beside; gpu_ag_gemm.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 330 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
bb ag-w4-n1 ag-gemm --world 4 --nodes 1
bb ag-w4-n1-push ag-gemm --world 4 --nodes 1 --spread false
bb ag-w4-n2 ag-gemm --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
python3 - <<'PY'
import json
for f in ['ag-w4-n1','ag-w4-n1-push','ag-w4-n2']:
    d={}
    for l in open(f'/tmp/logs/{f}.jsonl'):
        r=json.loads(l); d.setdefault(r['shape'],{})[r['impl']]=r
    print(f.ljust(14), ' '.join(f"{v['mkernel-fused']['ms']:.3f}/{v['mkernel-fused'].get('overlap_efficiency',0):.3f}/{v['mkernel-fused'].get('overlap_vs_model') or 0:.3f}" for s,v in d.items()))
PY
t gpu_ag_gemm
pack
