# Session 21, call 5 (4x H200; staged with /tmp/stage.sh gpu_moe plus mkernel-trace, this code's
# trace build): GEMM + ReduceScatter's first timelines. The trace build stamps the consumers'
# waits for their own tiles' partials and for their staging tile, the helpers' waits and sends,
# and each tile's claim, so the 1 x 4 miss (fused 1.19-1.28 of the GEMM alone) shows where it
# goes: waits, or slower tiles. Plain binary beside it (the stamps' cost). Then gpu_moe again
# (its tests were refactored after call 4).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-300}
left() { echo $(( LIMIT - SECONDS )); }
T=$H/bin/mkernel-trace; P=$H/bin/mkernel
for s in 16384x4096x8192 16384x8192x8192; do
  timeout 40 $T bench gemm-rs --world 4 --shapes $s --trace $L/tl-rs4-$s --json $L/tl-rs4-$s.jsonl > $L/tl-rs4-$s.log 2>&1; stamp "trace rs w4 $s rc=$?"
  timeout 40 $P bench gemm-rs --world 4 --shapes $s --json $L/pl-rs4-$s.jsonl > $L/pl-rs4-$s.log 2>&1; stamp "plain rs w4 $s rc=$?"
done
s=16384x4096x8192
timeout 40 $T bench gemm-ar --world 4 --shapes $s --trace $L/tl-ar4-$s --json $L/tl-ar4-$s.jsonl > $L/tl-ar4-$s.log 2>&1; stamp "trace ar w4 $s rc=$?"
( export CUDA_VISIBLE_DEVICES=0,1
  timeout 40 $T bench gemm-rs --world 2 --shapes $s --trace $L/tl-rs2-$s --json $L/tl-rs2-$s.jsonl > $L/tl-rs2-$s.log 2>&1; stamp "trace rs w2 $s rc=$?" )
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}$SFX.log 2>&1; stamp "$name ${1:-all}$SFX rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}$SFX.log)"; }
( export CUDA_VISIBLE_DEVICES=0,1 MKERNEL_REQUIRE_GPUS=2 SFX=-2; t gpu_moe 100 )
for f in $L/tl-*.gz; do :; done; gzip -9 $L/tl-*.rank*.jsonl
pack
cat $L/stamps.txt
for f in $L/tl-rs4-16384x4096x8192.log $L/pl-rs4-16384x4096x8192.log; do grep -h "rank 0\]" $f | grep -v "^\[rank 0\] *$" | tail -22; done
