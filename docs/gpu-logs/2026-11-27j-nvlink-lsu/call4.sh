# Session 10, call 4 (4x H200): the all-gather's new default (`auto` = lsu, 64 CTAs) against the
# old defaults (fan 16 at world 4, bulk 16 at world 2) at 1M / 16M / 256M, interleaved twice;
# with --device-barrier for the copy-engine comparison; gpu_comm and gpu_ag_gemm on 4 GPUs.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
ag() { local tag=$1; shift; timeout 90 $M bench allgather --sizes 1M,16M,256M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in 1 2; do
  ag w4-auto-r$rep --world 4; ag w4-fan16-r$rep --world 4 --copy fan --intra-ctas 16
  ag w4-auto-inplace-r$rep --world 4 --in-place; ag w4-fan16-inplace-r$rep --world 4 --copy fan --intra-ctas 16 --in-place
done
ag w4-auto-dev --world 4 --device-barrier
export CUDA_VISIBLE_DEVICES=0,1
for rep in 1 2; do ag w2-auto-r$rep --world 2; ag w2-bulk16-r$rep --world 2 --copy bulk --intra-ctas 16; done
ag w2-auto-dev --world 2 --device-barrier
unset CUDA_VISIBLE_DEVICES
export MKERNEL_REQUIRE_GPU=1
timeout 200 $H/bin/test-gpu_comm --test-threads 1 > $L/test-gpu_comm.log 2>&1; stamp "gpu_comm rc=$?"
timeout 280 $H/bin/test-gpu_ag_gemm --test-threads 1 > $L/test-gpu_ag_gemm.log 2>&1; stamp "gpu_ag_gemm rc=$?"
grep -E "test result" $L/test-gpu_comm.log $L/test-gpu_ag_gemm.log
python3 - <<'PY'
import json,glob,os
for f in sorted(glob.glob('/tmp/logs/w*.jsonl')):
    rs=[json.loads(l) for l in open(f)]
    print(os.path.basename(f)[:-6].ljust(22), ' '.join(f"{r['shape']}:{r['impl'].replace('copy-engine-','ce-')}={r['gbps']:.0f}" for r in rs if r['impl'] in ('mkernel','copy-engine-p2p','copy-engine-allgather-stepped')))
PY
pack
