# Session 27 (W x H200, one node; prepared, not yet run): the MoE with the spare warps moving rows
# (--side-pull true) against the default, with 16 (the tuned default at these configs) and 8
# pull CTAs, and with the copy engines; the twenty-sixth session's shipping in shares against its
# starting module (head.cubin: 7f272e6's, through MKERNEL_MODULE) once. gpu_moe
# spare_warps_across_gpus and one_node_two_gpus at W GPUs; bench moe at 1 x W, interleaved
# rounds, both issue configs; torch_baselines.py moe at world W. Stage test-gpu_moe, mkernel and
# head.cubin (docs/gpu-logs/2026-11-29b-short-tiles/README.md) in bin/, with prep.sh, summ.py
# and torch_baselines.py beside this script.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-520}
W=${W:-2}
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=$W
timeout 150 $H/bin/test-gpu_moe --exact spare_warps_across_gpus --nocapture > $L/t-spare_warps_across_gpus.log 2>&1; rc=$?; stamp "test spare_warps_across_gpus rc=$rc"
ok=$([ $rc -eq 0 ] && echo 1 || echo 0)
DS=4096x7168x2048x256x8
bb() { local tag=$1; shift; local l=$(( LIMIT - 110 - SECONDS )); [ $l -gt 60 ] && l=60; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l $H/bin/mkernel bench moe --world $W "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b; do
  bb def-$rep
  [ $ok -eq 1 ] && { bb side-$rep --side-pull true; bb side8-$rep --side-pull true --pull-ctas 8 --configs $DS; bb sidece-$rep --side-pull true --engines on; }
  [ $rep = a ] && ( export MKERNEL_MODULE=$H/bin/head.cubin; bb head-$rep )
done
[ $ok -eq 1 ] && bb side4-a --side-pull true --pull-ctas 4 --configs $DS
# Twenty-ninth session: the gathered form (own rows read where they are) now joins the drawn walk.
bb gath-a --gather --configs $DS
l=$(( LIMIT - 40 - SECONDS )); [ $l -gt 90 ] && l=90
[ $l -gt 20 ] && { PYTHONUNBUFFERED=1 timeout $l python3 $H/torch_baselines.py moe --json $L/torch-moe-w$W.jsonl > $L/torch-moe-w$W.log 2>&1; stamp "torch moe w$W rc=$?"; }
l=$(( LIMIT - 8 - SECONDS ))
[ $l -gt 30 ] && { timeout $l $H/bin/test-gpu_moe --exact one_node_two_gpus --nocapture > $L/t-one_node_two_gpus.log 2>&1; stamp "test one_node_two_gpus rc=$?"; }
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
python3 $H/summ.py $L
grep -h "op=moe\|ms" $L/torch-moe-w$W.log | tail -6 | cut -c1-200
