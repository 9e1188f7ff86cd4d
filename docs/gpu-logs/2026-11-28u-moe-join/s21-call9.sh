# Session 21, call 9 (4x H200; staged with /tmp/stage.sh gpu_gemm_rs): the first sends'
# stagger as an option (GemmRsOptions::stagger_ns, default 2500 ns for a pushed reduce-scatter on
# one node above two ranks). bench gemm-rs at 1 x 4, default against --stagger-ns 0, interleaved
# twice; then gpu_gemm_rs four_gpus_one_node (the default now staggers there).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
LIMIT=${LIMIT:-200}
left() { echo $(( LIMIT - SECONDS )); }
M=$H/bin/mkernel
for rep in 1 2; do
  timeout 40 $M bench gemm-rs --world 4 --json $L/stagger-$rep-rs-w4.jsonl > $L/stagger-$rep-rs-w4.log 2>&1; stamp "stagger $rep rc=$?"
  timeout 40 $M bench gemm-rs --world 4 --stagger-ns 0 --json $L/none-$rep-rs-w4.jsonl > $L/none-$rep-rs-w4.log 2>&1; stamp "none $rep rc=$?"
done
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}$SFX.log 2>&1; stamp "$name ${1:-all}$SFX rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}$SFX.log)"; }
( export MKERNEL_REQUIRE_GPUS=4 SFX=-4; t gpu_gemm_rs 100 four_gpus_one_node )
pack
cat $L/stamps.txt
for f in $L/*-rs-w4.jsonl; do python3 -c "
import json
for l in open('$f'):
  x=json.loads(l)
  if x['impl']=='mkernel-fused': print('%-22s %-16s fused %.4f fused/gemm %.3f stagger %s'%('$f'.split('/')[-1][:-6], x['shape'], x['ms'], x['fused_over_gemm'], x.get('stagger_ns')))"; done
