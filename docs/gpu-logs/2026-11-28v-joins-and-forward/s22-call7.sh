# Session 22, call 7 (4x H200; stage /tmp/stage.sh): the last chunk of each shard cut finer
# (`--last-chunk-parts`, default 1 = as before). Correctness (2 x 2, 2 x 1, 1 x 4; ragged,
# graphs, back to back, f32, in place), then bench ag-gemm at 2 x 2: default / 2 / 4 parts,
# interleaved twice.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-300}
M=$H/bin/mkernel
n=0
c() { local np=$1 nodes=$2 gpus=$3; shift 3; n=$((n+1)); timeout 80 $M launch -n $np --nodes $nodes --gpus $gpus --timeout-s 75 -- $M rank-check ag-gemm "$@" > $L/case$n.log 2>&1; stamp "case $n ($np ranks, $nodes nodes) $* rc=$?"; }
c 4 2 0,1,2,3 --shape 4000x8x72 --layout nk
c 4 2 0,1,2,3 --shape 8192x4096x4096 --last-chunk-parts 4 --back-to-back 20
c 4 2 0,1,2,3 --shape 4000x1544x1032 --layout nk --last-chunk-parts 3 --chunk-rows 48 --graph --f32
c 2 2 0,1 --shape 2000x1544x1032 --last-chunk-parts 4 --in-place --graph
c 4 1 0,1,2,3 --shape 4000x1544x1032 --last-chunk-parts 4 --spread false --back-to-back 20
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 70 ] && l=70; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb p1-$rep $M bench ag-gemm --world 4 --nodes 2 $S
  bb p2-$rep $M bench ag-gemm --world 4 --nodes 2 $S --last-chunk-parts 2
  bb p4-$rep $M bench ag-gemm --world 4 --nodes 2 $S --last-chunk-parts 4
done
pack
cat $L/stamps.txt
for f in $L/p?-?.log; do echo "$(basename $f) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | $(grep 'overlap efficiency' $f | sed 's/.*inter-node //; s/, path fused//' | tr '\n' ' ')"; done
