# Session 26 (W x H200, one node): the MoE with every router CTA shipping a share of the records
# (this code) against one CTA shipping them all (head.cubin: 7f272e6's module, through
# MKERNEL_MODULE), and with the copy engines moving the tokens (--engines on, own runs first)
# against the default (pull CTAs reading peers' x_heap over NVLink, one run of each source in
# turn). gpu_moe copy_engines and one_node_two_gpus at W GPUs; bench moe at 1 x W, default /
# 7f272e6's module / engines / own runs first without the engines, three rounds interleaved, both
# issue configs; engines with fewer and more pull CTAs on DeepSeek-like; torch_baselines.py moe
# at world W; at W=2 interfere2.py. Stage with head.cubin in bin/ (see the README).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-520}
W=${W:-2}
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=$W
left() { echo $(( LIMIT - SECONDS )); }
timeout 150 $H/bin/test-gpu_moe --exact copy_engines --nocapture > $L/t-copy_engines.log 2>&1; rc=$?; stamp "test copy_engines rc=$rc"
ok=$([ $rc -eq 0 ] && echo 1 || echo 0)
DS=4096x7168x2048x256x8; MX=8192x4096x14336x8x2
bb() { local tag=$1; shift; local l=$(( LIMIT - 110 - SECONDS )); [ $l -gt 60 ] && l=60; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l $H/bin/mkernel bench moe --world $W "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b c; do
  bb def-$rep
  ( export MKERNEL_MODULE=$H/bin/head.cubin; bb head-$rep )
  [ $ok -eq 1 ] && { bb ce-$rep --engines on; bb defof-$rep --own-first on; }
done
if [ $ok -eq 1 ]; then
  P=${PULLS:-"20 36"}
  for p in $P; do bb ce-p$p --engines on --configs $DS --pull-ctas $p; bb def-p$p --configs $DS --pull-ctas $p; done
fi
l=$(( LIMIT - 40 - SECONDS )); [ $l -gt 90 ] && l=90
[ $l -gt 20 ] && { PYTHONUNBUFFERED=1 timeout $l python3 $H/torch_baselines.py moe --json $L/torch-moe-w$W.jsonl > $L/torch-moe-w$W.log 2>&1; stamp "torch moe w$W rc=$?"; }
l=$(( LIMIT - 70 - SECONDS ))
[ $l -gt 30 ] && { timeout $l $H/bin/test-gpu_moe --exact one_node_two_gpus --nocapture > $L/t-one_node_two_gpus.log 2>&1; stamp "test one_node_two_gpus rc=$?"; }
# What NVLink bytes moved by the copy engines cost a GEMM at world 2: cuBLAS's 16384x4096x4096
# (the per-rank GEMM of GEMM + RS / AR at 16384x4096x8192) with 2 and 4 pieces of 32 MiB each
# way per GEMM (the reduce-scatter's 64 MiB and the all-reduce's 128 MiB).
l=$(( LIMIT - 8 - SECONDS )); [ $l -gt 60 ] && l=60
[ $W -eq 2 ] && [ $l -gt 20 ] && { PIECES=2,4 timeout $l python3 $H/interfere2.py 16384x4096x4096 > $L/interfere2.log 2>&1; stamp "interfere2 rc=$?"; }
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
python3 $H/summ.py $L
grep -h "op=moe\|ms" $L/torch-moe-w$W.log | tail -6 | cut -c1-200
grep -h "burst\|copies alone" $L/interfere2.log 2>/dev/null
