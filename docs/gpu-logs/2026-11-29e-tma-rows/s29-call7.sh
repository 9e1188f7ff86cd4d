# Session 29, call 7 (1x H200), as call 6 with gpu_comm only (the rebuilt ops now on the check's own communicator): after the bootstrap fix (acceptor joined on drop, a busy port tried
# again for 300 ms): gpu_comm (with the rebuilt all-gather ops reusing dropped ops' heap memory),
# gpu_ag_gemm and gpu_moe, MKERNEL_REQUIRE_GPU=1.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for t in gpu_comm; do
  MKERNEL_REQUIRE_GPU=1 timeout 150 $H/bin/test-$t --test-threads 1 --nocapture > $L/t-$t.log 2>&1; stamp "$t rc=$?"
done
pack
grep -H "test result\|FAILED\|panicked" $L/t-*.log | sed 's#/tmp/logs/##' | head -30
grep -h "rebuilt ok" $L/t-gpu_comm.log | sed 's/\[rank [0-9]*\] //' | sort | uniq -c | head
