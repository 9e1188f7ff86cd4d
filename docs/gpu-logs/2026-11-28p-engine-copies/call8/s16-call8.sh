# Session 16, call 8 (4x H200): the all-reduce's new pull_reduced default (two ranks, 32 MiB of
# partial and K/W = 4096): gpu_gemm_rs reduced_tiles_pulled (its default case at 4096x4096x8192),
# one_node_two_gpus and four_gpus_one_node with MKERNEL_REQUIRE_GPUS=4.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
for t in reduced_tiles_pulled one_node_two_gpus four_gpus_one_node; do
  timeout 150 $H/bin/test-gpu_gemm_rs --test-threads 1 $t > $L/$t.log 2>&1
  stamp "$t rc=$? $(grep 'test result' $L/$t.log)"
done
grep -h 'pull reduced' $L/reduced_tiles_pulled.log | grep 4096x4096x8192 | sed 's/.*rank/rank/' | cut -c1-200 | sort -u | tee $L/default.txt
pack
