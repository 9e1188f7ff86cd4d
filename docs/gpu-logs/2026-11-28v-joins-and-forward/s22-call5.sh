# Session 22, call 5 (4x H200; stage /tmp/stage.sh, this code with the new moe.jsonl lines):
# (1) the MoE at 2 x 2 on the new tuned lines (join, 12 pull CTAs, 64 records a run): rank-check
# at both configs, then bench moe; (2) the reduce-scatter's stagger at 1 x 4 swept (0, 2.5, 4 and
# 6 us, interleaved twice) beside torch_baselines.py multi (NCCL's reduce-scatter alone).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-540}
export MKERNEL_REQUIRE_GPU=1
M=$H/bin/mkernel
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for cfg in 4096x7168x2048x256x8 8192x4096x14336x8x2; do
  timeout 150 $M launch -n 4 --nodes 2 --gpus 0,1,2,3 --timeout-s 140 -- $M rank-check moe --config $cfg > $L/rc-moe-$cfg.log 2>&1; stamp "rank-check moe 2x2 $cfg rc=$?"
done
bb moe-2x2 $M bench moe --world 4 --nodes 2
for rep in a b; do
  for s in 0 2500 4000 6000; do bb rs-$s-$rep $M bench gemm-rs --world 4 --stagger-ns $s; done
done
timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
pack
cat $L/stamps.txt
tail -n 3 $L/rc-moe-*.log
grep -E 'mkernel-fused|alone|overlap' $L/moe-2x2.log
for f in $L/rs-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep gemm_rs $L/torch-multi-w4.log
