# Session 11, call 6 (4x H200): the staged partial for several nodes' collectors (working tree on
# f367066) against f367066 (mkernel-f367), 2 emulated nodes x 2, RS and AR, interleaved twice;
# then gpu_gemm_rs with MKERNEL_REQUIRE_GPU=1.
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1 bin=$2; shift 2; timeout 150 $H/bin/$bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in 1 2; do
  for op in gemm-rs gemm-ar; do
    for b in mkernel-f367 mkernel; do bb $op-w4-n2-$b-r$rep $b $op --world 4 --nodes 2; done
  done
done
python3 - <<'PY' | tee /tmp/logs/summary.txt
import json,glob,os,collections
t=collections.defaultdict(list)
for f in sorted(glob.glob('/tmp/logs/*.jsonl')):
    tag=os.path.basename(f)[:-6].rsplit('-r',1)[0]
    by={}
    for l in open(f):
        r=json.loads(l); by.setdefault(r['shape'],{})[r['impl']]=r
    for sh,v in by.items():
        f_=v['mkernel-fused']; t[(tag,sh)].append((f_['ms'],f_.get('overlap_vs_model',0)))
for k in sorted(t): print(k[0].ljust(26), k[1].ljust(18), '  '.join(f'{a:.3f} ({b:.3f})' for a,b in t[k]))
PY
export MKERNEL_REQUIRE_GPU=1
timeout 330 $H/bin/test-gpu_gemm_rs --test-threads 1 > $L/test-gpu_gemm_rs.log 2>&1; stamp "gpu_gemm_rs rc=$?"
grep -hE "^test |test result" $L/test-gpu_gemm_rs.log | cut -c1-150
pack
