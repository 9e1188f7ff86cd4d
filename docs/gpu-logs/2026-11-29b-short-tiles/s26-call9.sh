# Session 26, call 9 (1x H200): every source's records 16-byte aligned in the inbox
# (MoeParams::records_stride). gpu_moe whole, two_ranks_sharing_one_gpu now with an odd token count at top-k 8
# on two ranks sharing GPU 0 (104-byte records: before, every other source's started on 8 bytes).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
MKERNEL_REQUIRE_GPU=1 timeout 300 $H/bin/test-gpu_moe --test-threads 1 > $L/t-gpu_moe.log 2>&1; stamp "gpu_moe rc=$?"
pack
cat $L/stamps.txt
grep -h "test result" $L/t-*.log
