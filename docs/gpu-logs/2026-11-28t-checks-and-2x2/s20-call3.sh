# Session 20, call 3 (4x H200): (1) 2 x 2: the compute CTAs' spare warps copying the shard beside
# fewer push CTAs (--spread), four large shapes, two rounds interleaved; (2) the cases of
# gpu_ag_gemm four_gpus_one_node_and_two_nodes that call 2's limit cut (the 16th on), run as the
# test runs them (launcher, rank-check ag-gemm).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 60 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb n2-def-$rep $M bench ag-gemm --world 4 --nodes 2 $S
  bb n2-sp8-$rep $M bench ag-gemm --world 4 --nodes 2 $S --spread true --push-ctas 8
  bb n2-sp4-$rep $M bench ag-gemm --world 4 --nodes 2 $S --spread true --push-ctas 4
  bb n2-sp2-$rep $M bench ag-gemm --world 4 --nodes 2 $S --spread true --push-ctas 2
  bb n2-sp4e3-$rep $M bench ag-gemm --world 4 --nodes 2 $S --spread true --push-ctas 4 --spread-every 3
  bb n2-p12-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 12
done
python3 $H/s20sum.py > $L/sum.txt 2>&1
export MKERNEL_REQUIRE_GPU=1
n=0
c() { local nodes=$1; shift; n=$((n+1)); timeout 200 $M launch -n 4 --nodes $nodes --gpus 0,1,2,3 --timeout-s 190 -- $M rank-check ag-gemm "$@" > $L/case$n.log 2>&1; stamp "case $n (4 ranks, $nodes nodes) $* rc=$?"; }
c 2 --shape 8192x4096x4096 --layout nk --tail-rows 4 --back-to-back 20
c 1 --shape 4608x1544x1032 --dynamic true --tail-rows 6 --tail-ways 2 --graph
c 1 --shape 8192x4096x4096 --rounds 2 --graph --spread-every 1 --spread true --back-to-back 20
c 1 --shape 8192x4096x4096 --spread-push-every 3 --spread-unit 4096 --spread true --back-to-back 20
c 1 --shape 4000x1544x1032 --layout nk --f32 --chunk-rows 48 --spread true --back-to-back 20
c 1 --shape 8192x4096x4096 --layout nk --in-place --spread-unit 8192 --spread true --back-to-back 20
c 2 --shape 4000x1544x1032 --graph --spread true --back-to-back 20
pack
cat $L/sum.txt
cat $L/stamps.txt | grep case
