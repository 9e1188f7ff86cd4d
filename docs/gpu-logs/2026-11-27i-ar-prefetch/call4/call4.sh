# Session 9, call 4 (4x H200): (a) the prefetching GEMM + RS / AR at 1 x 4: gpu_gemm_rs's 4-GPU
# one-node tests, and the benches pushing (the 1 x 4 default) against pulling with prefetches,
# interleaved twice; (b) the MoE's early layout, second version (moe-early-layout-v2's device
# diff on top of main: mkernel-el, test-gpu_moe-el) against main at 1 x 4 and 2 x 2, then the
# whole gpu_moe suite on it (last: it hung there once).
source "$(dirname "$0")/prep.sh"
rm -f $L/*.log $L/*.jsonl
for t in four_gpus_one_node pulled_and_prefetched pushed_partials; do
  MKERNEL_REQUIRE_GPU=1 timeout 200 $H/bin/test-gpu_gemm_rs --exact $t --test-threads 1 > $OUT/test-gpu_gemm_rs-$t.log 2>&1; stamp "gpu_gemm_rs $t rc=$?"
  grep 'test result' $OUT/test-gpu_gemm_rs-$t.log
done
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for i in 1 2; do
  for cfg in "rs-push:gemm-rs:" "rs-pre:gemm-rs:--push off --prefetch on" "ar-push:gemm-ar:" "ar-pre:gemm-ar:--push off --prefetch on"; do
    IFS=: read name op flags <<< "$cfg"
    timeout 60 $H/bin/mkernel bench $op --world 4 --nodes 1 $S $flags --json $L/w4-$name-$i.jsonl > $L/w4-$name-$i.log 2>&1; stamp "$name $i rc=$?"
  done
done
bb() { local tag=$1 X=$2 N=$3; shift 3; timeout 60 $H/bin/$X bench moe --world 4 --nodes $N "$@" --json $L/moe-$tag.jsonl > $L/moe-$tag.log 2>&1; stamp "moe $tag rc=$?"; }
for i in 1 2; do for b in mkernel mkernel-el; do bb w4n1-$b-$i $b 1; done; done
for b in mkernel mkernel-el; do bb w4n2-$b-1 $b 2; done
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/w4-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[3:-6].ljust(12), '  '.join(f"{s} {v['mkernel-fused']:.3f}/{v['gemm-alone']:.3f}={v['mkernel-fused']/v['gemm-alone']:.3f}" for s,v in R.items()))
print('== moe (ms): config fused gemm-alone dispatch-alone unfused fused/max(alone)')
for f in sorted(glob.glob('/tmp/logs/moe-*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r.get('shape','?'),{})[r['impl']]=r['ms']
    for c,v in R.items():
        print(os.path.basename(f)[4:-6].ljust(20), str(c).ljust(26), ' '.join(f"{v.get(k,float('nan')):.3f}" for k in ('mkernel-fused','gemm-alone','dispatch-alone','mkernel-unfused')), f"{v['mkernel-fused']/max(v['gemm-alone'],v.get('dispatch-alone',0)):.3f}")
PY
pack
MKERNEL_BIN=$H/bin/mkernel-el MKERNEL_REQUIRE_GPU=1 timeout 240 $H/bin/test-gpu_moe-el --test-threads=1 > $OUT/test-gpu_moe-el.log 2>&1; stamp "gpu_moe-el rc=$?"
grep -E "^test |test result" $OUT/test-gpu_moe-el.log | sed 's/\[rank.*//' | tail -16
pack
