# Session 17, call 1 (4x H200): the arrival tail (--tail-rows R --tail-ways W: the walk's last R
# tile rows, the last to land, each tile cut into W k-ranges) at 2 emulated nodes x 2 and x 1,
# four large shapes, against none, interleaved twice; then gpu_ag_gemm's cases across nodes.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; timeout 60 $H/bin/mkernel bench ag-gemm "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
declare -A V=([none]="" [r2w4]="--tail-rows 2 --tail-ways 4" [r2w8]="--tail-rows 2 --tail-ways 8" [r4w2]="--tail-rows 4 --tail-ways 2" [r4w4]="--tail-rows 4 --tail-ways 4" [r8w2]="--tail-rows 8 --tail-ways 2")
for rep in a b; do
  for v in none r2w4 r2w8 r4w2 r4w4 r8w2; do bb n2w4-$v-$rep --world 4 --nodes 2 $S ${V[$v]}; done
done
for rep in a b; do
  for v in none r2w4 r4w2 r4w4; do CUDA_VISIBLE_DEVICES=0,1 bb n2w2-$v-$rep --world 2 --nodes 2 $S ${V[$v]}; done
done
python3 $H/tailab.py $L | tee $L/ab.txt
MKERNEL_REQUIRE_GPUS=4 timeout 200 $H/bin/test-gpu_ag_gemm --test-threads 1 four_gpus > $L/gpu_ag_gemm4.log 2>&1
stamp "gpu_ag_gemm four rc=$? $(grep 'test result' $L/gpu_ag_gemm4.log)"
MKERNEL_REQUIRE_GPUS=2 CUDA_VISIBLE_DEVICES=0,1 timeout 100 $H/bin/test-gpu_ag_gemm --test-threads 1 two_emulated > $L/gpu_ag_gemm2.log 2>&1
stamp "gpu_ag_gemm two_emulated rc=$? $(grep 'test result' $L/gpu_ag_gemm2.log)"
pack
cat $L/ab.txt
