# Session 12, call 2 (2x H200): the final code (every-thread `staged`, the watchdog, the MoE's
# skipped source) under gpu_gemm_rs and gpu_moe (the world-2 and shared-GPU cases; the 4- and
# 8-GPU cases skip: no 4-GPU machine lent now), then bench moe / gemm-rs / gemm-ar at world 2
# against the binary before (main's device code), interleaved twice.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; O=$H/bin/mkernel-main
timeout 250 $H/bin/test-gpu_gemm_rs --test-threads=1 > $L/gpu_gemm_rs.log 2>&1; stamp "gpu_gemm_rs rc=$?"
grep -E "^test result|skipped|FAILED|panicked" $L/gpu_gemm_rs.log | sort | uniq -c | head
timeout 200 $H/bin/test-gpu_moe --test-threads=1 > $L/gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
grep -E "^test result|skipped|FAILED|panicked" $L/gpu_moe.log | sort | uniq -c | head
bb() { local tag=$1 bin=$2; shift 2; timeout 100 $bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b; do
  for v in main new; do bin=$M; [ $v = main ] && bin=$O
    bb $v-$rep-moe-w2 $bin moe --world 2
    for op in gemm-rs gemm-ar; do bb $v-$rep-$op-w2 $bin $op --world 2; done
  done
done
python3 $H/ab.py $L | tee $L/ab.txt
python3 $H/abmoe.py $L | tee $L/abmoe.txt
pack
