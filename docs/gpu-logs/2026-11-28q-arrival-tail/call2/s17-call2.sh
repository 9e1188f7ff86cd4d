# Session 17, call 2 (4x H200): the arrival tail cut two ways over 2, 4 or 6 tile rows against
# none, three interleaved rounds, at 2 emulated nodes x 2 and x 1, four large shapes; then
# gpu_ag_gemm's cases across nodes and at four GPUs with the fixed tail cases.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; timeout 60 $H/bin/mkernel bench ag-gemm "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
declare -A V=([none]="" [r2w2]="--tail-rows 2 --tail-ways 2" [r4w2]="--tail-rows 4 --tail-ways 2" [r6w2]="--tail-rows 6 --tail-ways 2")
for rep in a b c; do
  for v in none r2w2 r4w2 r6w2; do bb n2w4-$v-$rep --world 4 --nodes 2 $S ${V[$v]}; done
  for v in none r2w2 r4w2 r6w2; do CUDA_VISIBLE_DEVICES=0,1 bb n2w2-$v-$rep --world 2 --nodes 2 $S ${V[$v]}; done
done
python3 $H/tailab.py $L > $L/ab.txt
MKERNEL_REQUIRE_GPUS=2 CUDA_VISIBLE_DEVICES=0,1 timeout 100 $H/bin/test-gpu_ag_gemm --test-threads 1 two_emulated > $L/gpu_ag_gemm2.log 2>&1
stamp "gpu_ag_gemm two_emulated rc=$? $(grep 'test result' $L/gpu_ag_gemm2.log)"
MKERNEL_REQUIRE_GPUS=4 timeout 220 $H/bin/test-gpu_ag_gemm --test-threads 1 four_gpus > $L/gpu_ag_gemm4.log 2>&1
stamp "gpu_ag_gemm four rc=$? $(grep 'test result' $L/gpu_ag_gemm4.log)"
pack
cat $L/ab.txt
