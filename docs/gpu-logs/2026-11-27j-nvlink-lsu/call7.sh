# Session 10, call 7 (4x H200): the review's fixes (bulk all-gather stops every thread after a
# ready timeout; no loads when an LSU fan has no place; the lining-up all-gather's diagnostics
# checked): gpu_comm on 4 GPUs, and the all-gather bench with and without --device-barrier.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
export MKERNEL_REQUIRE_GPU=1
timeout 200 $H/bin/test-gpu_comm --test-threads 1 > $L/test-gpu_comm.log 2>&1; stamp "gpu_comm rc=$?"
grep -E "test result" $L/test-gpu_comm.log
timeout 60 $M bench allgather --world 4 --sizes 16M,256M --json $L/w4.jsonl > $L/w4.log 2>&1; stamp "w4 rc=$?"
timeout 60 $M bench allgather --world 4 --sizes 16M,256M --device-barrier --json $L/w4-dev.jsonl > $L/w4-dev.log 2>&1; stamp "w4 dev rc=$?"
CUDA_VISIBLE_DEVICES=0,1 timeout 60 $M bench allgather --world 2 --sizes 1M,16M,256M --copy bulk --json $L/w2-bulk.jsonl > $L/w2-bulk.log 2>&1; stamp "w2 bulk rc=$?"
grep -hE "mkernel|copy-engine-allgather-stepped" $L/w4.log $L/w4-dev.log $L/w2-bulk.log
pack
