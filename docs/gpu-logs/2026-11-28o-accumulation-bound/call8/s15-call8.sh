# Session 15, call 8 (4x H200): this session's code on four GPUs: gpu_gemm_rs's pulled reduced
# tiles at 1 x 4 (three peers), the all-reduce at 1 x 4 pushing against pulling (two runs), then
# gpu_comm (the all-gather kernel's local_peers).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
timeout 100 $H/bin/test-gpu_gemm_rs --test-threads 1 reduced_tiles_pulled > $L/pull-test.log 2>&1
stamp "pull test rc=$? $(grep 'test result' $L/pull-test.log)"
bb() { local tag=$1; shift; timeout 60 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,8192x8192x8192"
for rep in a b; do
  bb push-$rep-gemm-ar-w4 gemm-ar --world 4 $S
  bb pull-$rep-gemm-ar-w4 gemm-ar --world 4 $S --pull-reduced on
done
python3 $H/ab.py $L | tee $L/ab.txt
timeout 150 $H/bin/test-gpu_comm --test-threads 1 > $L/gpu_comm.log 2>&1
stamp "gpu_comm rc=$? $(grep 'test result' $L/gpu_comm.log)"
pack
