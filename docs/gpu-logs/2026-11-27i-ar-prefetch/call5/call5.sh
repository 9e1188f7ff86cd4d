# Session 9, call 5 (4x H200): (a) MoE tidy (counts shipped with ordinary loads, two cleanups):
# the whole gpu_moe suite, bench moe at 1 x 4 against the previous binary (mkernel-main);
# (b) the all-gather alone at world 4 with the copy engines' at-once all-gather beside it;
# (c) AllGather + GEMM at 2 emulated nodes x 2 on 16384x4096x8192: the default, then a sweep
# of push CTAs x rows per flag, then the default again.
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log $L/*.jsonl
MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe --test-threads=1 > $OUT/test-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "^test |test result" $OUT/test-gpu_moe.log | sed 's/\[rank.*//' | tail -16
bb() { local tag=$1 X=$2; shift 2; timeout 60 $H/bin/$X bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for b in mkernel-main mkernel; do bb moe-w4n1-$b $b moe --world 4 --nodes 1; done
bb allgather-w4 mkernel allgather --world 4 --sizes 256M
bb ag-w4n2-def1 mkernel ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192
timeout 200 $H/bin/mkernel tune ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 --push-ctas 6,8,10,12 --chunk-rows 32,64,128 --rounds 2 --out $L/tune-ag-w4n2.jsonl > $L/tune-ag-w4n2.log 2>&1; stamp "tune rc=$?"
bb ag-w4n2-def2 mkernel ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192
python3 - <<'PY'
import json, glob, os
print('== moe (ms): config fused gemm-alone dispatch-alone unfused fused/max(alone)')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r.get('shape','?'),{})[r['impl']]=r['ms']
    for c,v in R.items():
        print(os.path.basename(f)[4:-6].ljust(20), str(c).ljust(26), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone','mkernel-unfused')), f"{v['mkernel-fused']/max(v['gemm-alone'],v.get('dispatch-alone',0)):.3f}")
for f in ['/tmp/logs/allgather-w4.jsonl']:
    for l in open(f):
        r=json.loads(l); print('allgather', r.get('impl'), r.get('bytes', r.get('size')), f"{r['ms']:.3f} ms", r.get('busbw_gbs', r.get('gbps','')))
for f in sorted(glob.glob('/tmp/logs/ag-w4n2-*.jsonl')):
    for l in open(f):
        r=json.loads(l)
        print(os.path.basename(f), r['impl'], f"{r['ms']:.3f}", {k: r[k] for k in ('overlap_vs_model','modelled_inter_node_ms','push_ctas','chunk_rows') if k in r})
PY
tail -20 $L/tune-ag-w4n2.log
pack
