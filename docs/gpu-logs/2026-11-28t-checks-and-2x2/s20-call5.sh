# Session 20, call 5 (4x H200): the all-gather's and ring attention's rank-checks on alternating
# inputs (launches back to back, no barrier across nodes) and the MoE's poisoned layout tables.
# First a control build whose all-gather and ring-attention senders skip the wait for the FIFO's
# released position (noquiet.diff): the new checks must fail it across nodes; then the same
# commands on this session's code, then gpu_ring_attention, gpu_comm and gpu_moe whole.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
left() { echo $(( 560 - (SECONDS - T0) )); }
n=0
c() { local bin=$1 np=$2 nodes=$3 gpus=$4; shift 4; n=$((n+1)); timeout 60 $H/bin/$bin launch -n $np --nodes $nodes --gpus $gpus --timeout-s 55 -- $H/bin/$bin rank-check "$@" > $L/c$n-$bin.log 2>&1; stamp "c$n $bin ($np ranks, $nodes nodes) $* rc=$?"; }
for bin in mkernel-noquiet mkernel; do
  c $bin 2 2 0,1 allgather --shard-bytes 1000003 --iters 4
  c $bin 2 2 0,1 allgather --shard-bytes 67108864 --iters 4
  c $bin 2 2 0,1 allgather --shard-bytes 67108864 --iters 4 --in-place
  c $bin 4 2 0,1,2,3 allgather --shard-bytes 16777216 --iters 4
  c $bin 2 2 0,1 ring-attention --config 2x4x300x128
  c $bin 2 2 0,1 ring-attention --config 1x8x4096x128 --causal
  c $bin 4 2 0,1,2,3 ring-attention --config 1x8x2048x128 --causal --slots 2
done
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
t gpu_ring_attention 80
t gpu_moe 170
t gpu_comm 170
pack
cat $L/stamps.txt
grep -h "differs\|is [0-9a-f][0-9a-f], want\|wrong\|Error\|error" $L/c*-mkernel-noquiet.log | head -8
