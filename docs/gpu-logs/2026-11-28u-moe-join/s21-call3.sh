# Session 21, call 3 (4x H200; staged with /tmp/stage.sh gpu_moe, mkernel-base = cb2f576's binary,
# mkernel-trace = this code's trace build): the MoE's pull CTAs joining the tiles (MOE_JOIN).
# gpu_moe whole at two GPUs and its four-GPU functions; then bench moe A/B interleaved (base,
# join, --no-join) at 1 x 4 and 1 x 2, a pull-CTA sweep with the join, a timeline, and
# torch_baselines.py moe at both worlds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-560}   # below the run's timeout_s (590)
left() { echo $(( LIMIT - SECONDS )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}$SFX.log 2>&1; stamp "$name ${1:-all}$SFX rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}$SFX.log)"; }
( export CUDA_VISIBLE_DEVICES=0,1 MKERNEL_REQUIRE_GPUS=2 SFX=-2; t gpu_moe 120 )
( export MKERNEL_REQUIRE_GPUS=4 SFX=-4; t gpu_moe 60 four_gpus_one_node; t gpu_moe 60 two_emulated_nodes_of_two_gpus )
M=$H/bin/mkernel; B=$H/bin/mkernel-base; T=$H/bin/mkernel-trace
b() { local v=$1 rep=$2 w=$3 bin=$4; shift 4; local l=$(left); [ $l -lt 30 ] && { stamp "bench $v-$rep w$w skipped"; return; }
  timeout 60 $bin bench moe --world $w "$@" --json $L/$v-$rep-moe-w$w.jsonl > $L/$v-$rep-moe-w$w.log 2>&1; stamp "bench moe $v-$rep w$w rc=$?"; }
for rep in 1 2; do
  b base $rep 4 $B; b join $rep 4 $M; b nojoin $rep 4 $M --no-join
done
for p in 16 32 40; do b p$p 1 4 $M --configs 4096x7168x2048x256x8 --pull-ctas $p; done
for p in 4 16; do b p$p 1 4 $M --configs 8192x4096x14336x8x2 --pull-ctas $p; done
timeout 40 $T bench moe --world 4 --configs 4096x7168x2048x256x8 --trace $L/tl-moe --trace-epochs 30,3 > $L/tl-moe.log 2>&1; stamp "trace moe rc=$?"
export CUDA_VISIBLE_DEVICES=0,1
for rep in 1 2; do b base $rep 2 $B; b join $rep 2 $M; done
for p in 28 36; do b p$p 1 2 $M --configs 4096x7168x2048x256x8 --pull-ctas $p; done
[ $(left) -gt 60 ] && { timeout 80 python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe w2 rc=$?"; }
unset CUDA_VISIBLE_DEVICES
[ $(left) -gt 60 ] && { timeout 80 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe w4 rc=$?"; }
pack
cat $L/stamps.txt
python3 $H/abmoe.py $L
grep -h "router / pull CTAs\|compute CTAs\|tiles:" $L/tl-moe.log | head -12
grep -h "moe_dispatch_gemm" $L/join-1-moe-w4.log | head -8
