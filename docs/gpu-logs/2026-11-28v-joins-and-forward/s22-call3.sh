# Session 22, call 3 (4x H200; stage /tmp/stage.sh gpu_ag_gemm, with mkernel-base (9e3cc75) and
# mkernel-trace (this code, trace build)): the forward CTAs sharing each chunk (each copies its
# part, the last raises the flag). Correctness at 2 x 1 and 2 x 2 (the test's several-node
# cases, plus 1, 3 and 4 forward CTAs), then bench ag-gemm at 2 x 2, this code against 9e3cc75
# interleaved three times, 3 and 4 forward CTAs once each; one traced launch.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-560}
M=$H/bin/mkernel; B=$H/bin/mkernel-base
( export MKERNEL_REQUIRE_GPUS=2; timeout 100 $H/bin/test-gpu_ag_gemm --test-threads 1 two_emulated_nodes_one_gpu_each > $L/t-2x1.log 2>&1; stamp "gpu_ag_gemm two_emulated_nodes_one_gpu_each rc=$? $(grep 'test result' $L/t-2x1.log)" )
n=0
c() { local nodes=$1; shift; n=$((n+1)); timeout 100 $M launch -n 4 --nodes $nodes --gpus 0,1,2,3 --timeout-s 90 -- $M rank-check ag-gemm "$@" > $L/case$n.log 2>&1; stamp "case $n (4 ranks, $nodes nodes) $* rc=$?"; }
c 2 --shape 4000x8x72 --layout nk
c 2 --shape 4000x1544x1032 --layout kn --in-place --graph
c 2 --shape 4000x1544x1032 --layout nk --fan --f32
c 2 --shape 8192x4096x4096 --layout nk --tail-rows 4 --back-to-back 20
c 2 --shape 4000x1544x1032 --graph --spread true --back-to-back 20
c 2 --shape 4000x1544x1032 --fwd-ctas 3 --chunk-rows 40 --back-to-back 20
c 2 --shape 8192x4096x4096 --fwd-ctas 1 --in-place --graph
c 2 --shape 4000x1544x1032 --layout nk --fwd-ctas 4 --f32 --graph
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 70 ] && l=70; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b c; do
  bb new-$rep $M bench ag-gemm --world 4 --nodes 2 $S
  bb base-$rep $B bench ag-gemm --world 4 --nodes 2 $S
done
bb new-f3 $M bench ag-gemm --world 4 --nodes 2 $S --fwd-ctas 3
bb new-f4 $M bench ag-gemm --world 4 --nodes 2 $S --fwd-ctas 4
bb trace-ag $H/bin/mkernel-trace bench ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 --reps 40 --trace $L/tl-ag
pack
cat $L/stamps.txt
for f in $L/new-?.log $L/base-?.log $L/new-f?.log; do echo "$(basename $f) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | $(grep 'overlap efficiency' $f | sed 's/.*inter-node //; s/, path fused//' | tr '\n' ' ')"; done
grep -E 'last to end|tiles:|forwarded' $L/trace-ag.log | head -16
