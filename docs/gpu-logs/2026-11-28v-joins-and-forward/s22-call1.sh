# Session 22, call 1 (4x H200; stage /tmp/stage.sh gpu_ag_gemm with the base binary as
# mkernel-base): the inter-send CTA joining AllGather + GEMM's drawn walk once its WRITEs are
# released. Correctness at 2 x 1 (the test function) and 2 x 2 (the several-node cases of
# four_gpus_one_node_and_two_nodes, as the test runs them); then bench ag-gemm at 2 x 2, four
# large shapes, this code against 9e3cc75's binary, interleaved twice. Then bench gemm-rs at 1 x 4,
# the stagger's default (8-wave floor) against --stagger-ns 0, twice.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-560}
M=$H/bin/mkernel; B=$H/bin/mkernel-base
( export MKERNEL_REQUIRE_GPUS=2; timeout 150 $H/bin/test-gpu_ag_gemm --test-threads 1 two_emulated_nodes_one_gpu_each > $L/t-2x1.log 2>&1; stamp "gpu_ag_gemm two_emulated_nodes_one_gpu_each rc=$? $(grep 'test result' $L/t-2x1.log)" )
n=0
c() { local nodes=$1; shift; n=$((n+1)); timeout 120 $M launch -n 4 --nodes $nodes --gpus 0,1,2,3 --timeout-s 110 -- $M rank-check ag-gemm "$@" > $L/case$n.log 2>&1; stamp "case $n (4 ranks, $nodes nodes) $* rc=$?"; }
c 2 --shape 4000x8x72 --layout nk
c 2 --shape 4000x1544x1032 --layout kn --in-place --graph
c 2 --shape 4000x1544x1032 --layout nk --fan --f32
c 2 --shape 8192x4096x4096 --layout nk --tail-rows 4 --back-to-back 20
c 2 --shape 4000x1544x1032 --graph --spread true --back-to-back 20
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 70 ] && l=70; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb new-$rep $M bench ag-gemm --world 4 --nodes 2 $S
  bb base-$rep $B bench ag-gemm --world 4 --nodes 2 $S
done
# The reduce-scatter's stagger at 1 x 4 from the 8-wave floor on (default) against none.
for rep in 1 2; do
  bb rs-default-$rep $M bench gemm-rs --world 4
  bb rs-none-$rep $M bench gemm-rs --world 4 --stagger-ns 0
done
pack
cat $L/stamps.txt
for f in $L/new-a.log $L/base-a.log $L/new-b.log $L/base-b.log; do echo "== $f"; grep -E "overlap efficiency|mkernel-fused|gemm-alone" $f; done
for f in $L/rs-*.log; do echo "== $f"; grep -E "fused |gemm-alone" $f; done
