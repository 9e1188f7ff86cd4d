# Session 9, call 2 (2x H200): prefetch without (mkernel-old) and with (mkernel) the own tile's L2
# prefetch of the inbox; the all-reduce's lead with prefetches. Interleaved twice.
source "$(dirname "$0")/prep.sh"
S="--shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192"
P="--push off --prefetch on"
for i in 1 2; do
  for cfg in "ar-pre-old:mkernel-old:gemm-ar:$P" "ar-pre-l2:mkernel:gemm-ar:$P" "ar-push:mkernel:gemm-ar:" \
             "ar-pre-l2-lead264:mkernel:gemm-ar:$P --lead 264" "ar-pre-l2-lead528:mkernel:gemm-ar:$P --lead 528" \
             "rs-pre-old:mkernel-old:gemm-rs:--prefetch on" "rs-pre-l2:mkernel:gemm-rs:--prefetch on" "rs-pull:mkernel:gemm-rs:"; do
    IFS=: read name bin op flags <<< "$cfg"
    timeout 60 $H/bin/$bin bench $op --world 2 $S $flags --json $L/$name-$i.jsonl > $L/$name-$i.log 2>&1; stamp "$name $i rc=$?"
  done
done
python3 - <<'PY'
import json, glob, os
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    R={}
    for l in open(f):
        r=json.loads(l); R.setdefault(r['shape'],{})[r['impl']]=r['ms']
    print(os.path.basename(f)[:-6].ljust(22), '  '.join(f"{s} {v['mkernel-fused']:.3f}/{v['gemm-alone']:.3f}={v['mkernel-fused']/v['gemm-alone']:.3f}" for s,v in R.items()))
PY
pack
