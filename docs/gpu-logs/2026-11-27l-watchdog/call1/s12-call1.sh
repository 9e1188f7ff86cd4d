# Session 12, call 1 (4x H200): the watchdog (gpu_selftest), the every-thread `staged` arrival
# under racecheck and against main in bench, then gpu_gemm_rs at 4 GPUs (main + watchdog).
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel; E=$H/bin/mkernel-every
export MKERNEL_REQUIRE_GPU=1
CUDA_VISIBLE_DEVICES=0 timeout 120 $H/bin/test-gpu_selftest --test-threads=4 > $L/gpu_selftest.log 2>&1; stamp "gpu_selftest rc=$?"
grep -E "^test result|stuck_child ok|FAILED|panicked" $L/gpu_selftest.log | head -8
CS=/usr/local/cuda/bin/compute-sanitizer
for op in "gemm-rs" "gemm-ar --one-shot false"; do
  tag=race-every-${op%% *}
  CUDA_VISIBLE_DEVICES=0,1 timeout 70 $M launch -n 2 --timeout-s 60 -- $CS --tool racecheck --error-exitcode 9 $E rank-check $op --rounds 1 --back-to-back 2 --timeout-ms 45000 > $L/$tag.log 2>&1; stamp "$tag rc=$?"
  grep -E "hazard|ERROR SUMMARY|RACECHECK SUMMARY" $L/$tag.log | sort | uniq -c | head -6
done
bb() { local tag=$1 bin=$2; shift 2; timeout 100 $bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b; do
  for op in gemm-rs gemm-ar; do
    for v in main every; do bin=$M; [ $v = every ] && bin=$E
      CUDA_VISIBLE_DEVICES=0,1 bb $v-$rep-$op-w2 $bin $op --world 2
      bb $v-$rep-$op-w4 $bin $op --world 4
    done
  done
done
python3 $H/ab.py $L | tee $L/ab.txt
timeout 330 $H/bin/test-gpu_gemm_rs --test-threads=1 > $L/gpu_gemm_rs.log 2>&1; stamp "gpu_gemm_rs rc=$?"
grep -E "^test |^test result" $L/gpu_gemm_rs.log | tail -30
pack
