# Session 9, call 1 (2x H200): GEMM + RS / AR with the own tiles' partials prefetched by the send
# tiles (--push off --prefetch on). Tests first, then benches interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1
for t in pulled_and_prefetched one_node_two_gpus two_emulated_nodes_two_gpus; do
  timeout 200 $H/bin/test-gpu_gemm_rs --exact $t --test-threads 1 > $OUT/test-$t.log 2>&1; stamp "test $t rc=$?"
  tail -3 $OUT/test-$t.log
done
S="--shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192"
for i in 1 2; do
  for cfg in "ar-push:gemm-ar:" "ar-pull:gemm-ar:--push off" "ar-pre:gemm-ar:--push off --prefetch on" "rs-pull:gemm-rs:" "rs-pre:gemm-rs:--prefetch on"; do
    IFS=: read name op flags <<< "$cfg"
    timeout 60 $H/bin/mkernel bench $op --world 2 $S $flags --json $L/$name-$i.jsonl > $L/$name-$i.log 2>&1; stamp "$name $i rc=$?"
  done
done
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(12), '  '.join(f"{s} {v['mkernel-fused']:.3f}/{v['gemm-alone']:.3f}={v['mkernel-fused']/v['gemm-alone']:.3f}" for s,v in R.items()))
PY
pack
