# Session 22, call 2 (4x H200; stage /tmp/stage.sh gpu_gemm_rs with mkernel-base (9e3cc75),
# mkernel-nojoin (this code, the inter-send CTA not joining) and mkernel-trace (this code, trace
# build)): (1) AllGather + GEMM at 2 x 2, this code / no join / 9e3cc75 interleaved three times,
# to tell the join from the code change, and this code with the stream-K tail of the last partial
# wave (--tail-split true); one traced launch; (2) gpu_gemm_rs four_gpus_one_node
# (its --stagger-ns 3000 case); (3) torch_baselines.py multi at world 4; (4) tune moe --join on,off
# at 1 x 4 Mixtral-like and 2 x 2.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
M=$H/bin/mkernel
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 70 ] && l=70; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b c; do
  for v in mkernel mkernel-nojoin mkernel-base; do bb $v-$rep $H/bin/$v bench ag-gemm --world 4 --nodes 2 $S; done
  bb mkernel-tailsplit-$rep $M bench ag-gemm --world 4 --nodes 2 $S --tail-split true
done
bb trace-ag $H/bin/mkernel-trace bench ag-gemm --world 4 --nodes 2 --shapes 16384x4096x8192 --reps 40 --trace $L/tl-ag
export MKERNEL_REQUIRE_GPU=1
( export MKERNEL_REQUIRE_GPUS=4; timeout 150 $H/bin/test-gpu_gemm_rs --test-threads 1 four_gpus_one_node > $L/t-rs4.log 2>&1; stamp "gpu_gemm_rs four_gpus_one_node rc=$? $(grep 'test result' $L/t-rs4.log)" )
timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
l=$(( LIMIT - SECONDS - 100 )); [ $l -gt 60 ] && l=60
timeout $l $M tune moe --world 4 --configs 8192x4096x14336x8x2 --pull-ctas 8,12 --run-records 16 --join on,off --rounds 2 --out $L/tune-mx-w4.jsonl > $L/tune-mx-w4.log 2>&1; stamp "tune mx w4 rc=$?"
l=$(( LIMIT - SECONDS - 10 )); [ $l -gt 90 ] && l=90
timeout $l $M tune moe --world 4 --nodes 2 --configs 4096x7168x2048x256x8,8192x4096x14336x8x2 --pull-ctas 12,24 --run-records 32,64 --join on,off --rounds 2 --out $L/tune-2x2.jsonl > $L/tune-2x2.log 2>&1; stamp "tune 2x2 rc=$?"
pack
cat $L/stamps.txt
for f in $L/mkernel*.log; do echo "== $f"; grep -E "overlap efficiency" $f | sed 's/.*\] //; s/(fused .*alone)), //'; done
grep -A40 -i 'summary\|timeline' $L/trace-ag.log | head -60
cat $L/tune-*.jsonl
