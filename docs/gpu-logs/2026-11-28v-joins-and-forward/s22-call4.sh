# Session 22, call 4 (4x H200; stage /tmp/stage.sh with mkernel-base (9e3cc75 = HEAD's kernels),
# mkernel-ahead3 and mkernel-ahead2 (HEAD with BULK_AHEAD 3 / 2 instead of 6: more of the bulk
# ring's stages hold stores in flight)): does a copy CTA move more over NVLink with fewer loads
# ahead? AllGather + GEMM at 2 x 2 (forward hop) and 1 x 4, and the bulk all-gather alone at 1 x 4;
# then bench gemm-rs at 1 x 4 beside torch_baselines.py multi (NCCL's reduce-scatter alone in
# the same call).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 80 ] && l=80; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
V="mkernel-base mkernel-ahead3 mkernel-ahead2"
# Correctness of the variants' copies first (one 2 x 2 AllGather + GEMM case, the bulk all-gather).
for v in $V; do
  timeout 100 $H/bin/$v launch -n 4 --nodes 2 --gpus 0,1,2,3 --timeout-s 90 -- $H/bin/$v rank-check ag-gemm --shape 4000x1544x1032 --back-to-back 20 > $L/rc-$v.log 2>&1; stamp "rank-check ag-gemm 2x2 $v rc=$?"
done
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  for v in $V; do bb n2-$v-$rep $H/bin/$v bench ag-gemm --world 4 --nodes 2 $S; done
done
for v in $V; do bb n1-$v $H/bin/$v bench ag-gemm --world 4 $S; done
for v in $V; do bb agb-$v $H/bin/$v bench allgather --world 4 --copy bulk --sizes 16M,256M; done
bb rs $H/bin/mkernel bench gemm-rs --world 4
timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
pack
cat $L/stamps.txt
for f in $L/n?-*.log; do echo "$(basename $f) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | $(grep 'overlap efficiency' $f | sed 's/.*efficiency //; s/ (fused.*inter-node / \/ /; s/, path fused//' | tr '\n' ' ')"; done
for f in $L/agb-*.log; do echo "== $f"; grep -E 'bulk|ce' $f | tail -n 4; done
grep -E 'mkernel-fused|gemm-alone' $L/rs.log
grep gemm_rs $L/torch-multi-w4.log
