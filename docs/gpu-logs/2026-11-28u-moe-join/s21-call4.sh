# Session 21, call 4 (4x H200; staged with /tmp/stage.sh gpu_moe): the MoE with the pull CTAs
# joining the tiles and the grouped GEMM alone on every SM. gpu_moe whole at two GPUs and at four
# on one node; `tune moe` at 1 x 4 and 1 x 2 (more pull CTAs pay once they join); bench moe at the
# tuned points beside torch_baselines.py moe.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-520}   # below the run's timeout_s (550)
left() { echo $(( LIMIT - SECONDS )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}$SFX.log 2>&1; stamp "$name ${1:-all}$SFX rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}$SFX.log)"; }
( export CUDA_VISIBLE_DEVICES=0,1 MKERNEL_REQUIRE_GPUS=2 SFX=-2; t gpu_moe 120 )
( export MKERNEL_REQUIRE_GPUS=4 SFX=-4; t gpu_moe 60 four_gpus_one_node )
M=$H/bin/mkernel
DS=4096x7168x2048x256x8; MX=8192x4096x14336x8x2
tu() { local tag=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 10 ] && { stamp "tune $tag skipped"; return; }
  timeout $lim $M tune moe --rounds 2 --out $L/tune-$tag.jsonl "$@" > $L/tune-$tag.log 2>&1; stamp "tune $tag rc=$? (limit ${lim}s)"; }
tu ds-w4 90 --world 4 --configs $DS --pull-ctas 24,32,40,48 --run-records 4,5,6
tu mx-w4 40 --world 4 --configs $MX --pull-ctas 4,8,12,16 --run-records 16
export CUDA_VISIBLE_DEVICES=0,1
tu ds-w2 80 --world 2 --configs $DS --pull-ctas 20,28,36,44 --run-records 5,6
tu mx-w2 40 --world 2 --configs $MX --pull-ctas 4,8,12,16 --run-records 16
unset CUDA_VISIBLE_DEVICES
pick() { python3 -c "import json,sys; x=[json.loads(l) for l in open('$1')][0]; print('--pull-ctas',x['pull_ctas'],'--run-records',x['run_records'])" 2>/dev/null; }
b() { local tag=$1 w=$2 cfg=$3; shift 3; local l=$(left); [ $l -lt 25 ] && { stamp "bench $tag skipped"; return; }
  timeout 40 $M bench moe --world $w --configs $cfg "$@" --json $L/bench-$tag.jsonl > $L/bench-$tag.log 2>&1; stamp "bench $tag ($*) rc=$?"; }
for rep in 1 2; do
  b ds-w4-$rep 4 $DS $(pick $L/tune-ds-w4.jsonl); b mx-w4-$rep 4 $MX $(pick $L/tune-mx-w4.jsonl)
  b mx-w4-nojoin-$rep 4 $MX $(pick $L/tune-mx-w4.jsonl) --no-join
done
[ $(left) -gt 45 ] && { timeout 60 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe w4 rc=$?"; }
export CUDA_VISIBLE_DEVICES=0,1
for rep in 1 2; do
  b ds-w2-$rep 2 $DS $(pick $L/tune-ds-w2.jsonl); b mx-w2-$rep 2 $MX $(pick $L/tune-mx-w2.jsonl)
done
[ $(left) -gt 45 ] && { timeout 60 python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe w2 rc=$?"; }
pack
cat $L/stamps.txt
cat $L/tune-*.jsonl
grep -h "moe_dispatch_gemm" $L/bench-*-1.log | sed 's/^\[rank 0\] //'
grep -h "torch_ms" $L/torch-moe-w*.log
