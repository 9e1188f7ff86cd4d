# Call 6 (x4): fanned-out NVLink copies (each piece loaded once, stored to every local rank):
# gpu_comm and gpu_ag_gemm (every test, the fan cases added); the all-gather bulk vs fan beside
# the copy engine at world 4 and 2; AllGather + GEMM default vs --fan (and --fan with 4 push
# CTAs) at 1 x 4, interleaved twice, and at 1 x 2; torch multi at world 4.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local b=$1; shift; timeout 150 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
t gpu_comm
t gpu_ag_gemm
for w in 4 2; do for c in bulk fan; do for ip in "" --in-place; do
  timeout 40 $M launch -n $w --nodes 1 --timeout-s 35 -- $M bench allgather --intra-ctas 16 --copy $c $ip --json $L/allgather-w$w-$c$ip.jsonl > $L/allgather-w$w-$c$ip.log 2>&1; stamp "allgather w$w $c $ip rc=$?"
  grep -E "268435456" $L/allgather-w$w-$c$ip.log | cut -c1-110
done; done; done
S4="16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for r in 1 2; do for v in def fan fan4; do
  a=""; [ $v = fan ] && a="--fan"; [ $v = fan4 ] && a="--fan --push-ctas 4"
  timeout 60 $M bench ag-gemm --world 4 --nodes 1 --shapes $S4 $a --json $L/ag-w4-$v-$r.jsonl > $L/ag-w4-$v-$r.log 2>&1; stamp "ag w4 $v run $r rc=$?"
  grep -E "overlap eff" $L/ag-w4-$v-$r.log | cut -c10-60
done; done
for v in def fan; do
  a=""; [ $v = fan ] && a="--fan"
  timeout 60 $M bench ag-gemm --world 2 --nodes 1 --shapes $S4 $a --json $L/ag-w2-$v.jsonl > $L/ag-w2-$v.log 2>&1; stamp "ag w2 $v rc=$?"
  grep -E "overlap eff" $L/ag-w2-$v.log | cut -c10-60
done
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
pack
