# Call 3 (x4, binaries of 7b0255c + ring slot release fix + ring link model): ring tests and
# benches at world 4 beside torch ring; AllGather + GEMM push A/B at 1 x 4 and the tuned 2 x 2
# points vs defaults; tune moe at world 4; GEMM + RS / AR experiments; torch multi + moe.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
timeout 150 $H/bin/test-gpu_ring_attention --test-threads=1 --nocapture > $L/test-ring.log 2>&1; stamp "test ring rc=$? $(grep -E '^test result' $L/test-ring.log | tail -1)"
for n in 2 1; do
  timeout 100 $M bench ring-attention --world 4 --nodes $n --json $L/ring-w4-n$n.jsonl > $L/ring-w4-n$n.log 2>&1; stamp "ring n$n rc=$?"
  grep -E "^\[rank 0\]   |time /" $L/ring-w4-n$n.log | cut -c1-170
done
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py ring --json $L/torch-ring-w4.jsonl > $L/torch-ring-w4.log 2>&1; stamp "torch ring rc=$?"
S2="16384x4096x8192,32768x4096x8192"
for r in 1 2; do for p in 4 6 def; do
  a=""; [ $p = def ] || a="--push-ctas $p"
  timeout 60 $M bench ag-gemm --world 4 --nodes 1 --shapes $S2 $a --json $L/ag-n1-p$p-$r.jsonl > $L/ag-n1-p$p-$r.log 2>&1; stamp "ag n1 push $p run $r rc=$?"
  grep -E "overlap eff" $L/ag-n1-p$p-$r.log | cut -c1-80
done; done
for r in 1 2; do for v in def t; do
  a=""; [ $v = def ] || a="--push-ctas 8 --chunk-rows 64"
  timeout 60 $M bench ag-gemm --world 4 --nodes 2 --shapes $S2 $a --json $L/ag-n2-$v-$r.jsonl > $L/ag-n2-$v-$r.log 2>&1; stamp "ag n2 $v run $r rc=$?"
  grep -E "overlap eff" $L/ag-n2-$v-$r.log | cut -c1-140
done; done
[ -f $H/rsar.sh ] && { source $H/rsar.sh; stamp "rsar experiments done"; }
env $W4 PYTHONUNBUFFERED=1 timeout 120 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi rc=$?"
timeout 150 $M tune moe --world 4 --nodes 1 --out $L/tune-moe-w4-n1.jsonl > $L/tune-moe-w4-n1.log 2>&1; stamp "tune moe n1 rc=$?"
timeout 150 $M tune moe --world 4 --nodes 2 --out $L/tune-moe-w4-n2.jsonl > $L/tune-moe-w4-n2.log 2>&1; stamp "tune moe n2 rc=$?"
cat $L/tune-moe-w4-n*.jsonl | cut -c1-220
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe rc=$?"
pack
