# Session 17, call 3 (2x H200; the four-GPU kinds were no longer lent): the arrival tail's
# default (2 rows cut 2 ways where the modelled link takes 1.5x the GEMM) against the binary of
# e78f18c (no arrival tail), interleaved twice at 2 emulated nodes x 1; the gpu_ag_gemm suite on
# two GPUs; gpu_gemm_rs reduced_tiles_pulled (1 x 2) and gpu_gemm stream_k_shapes_and_boundaries
# on e78f18c's half-tile boxes (the sixteenth session's follow-ups).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1 bin=$2; shift 2; timeout 60 $H/bin/$bin bench ag-gemm "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb n2w2-old-$rep mkernel-old --world 2 --nodes 2 $S
  bb n2w2-new-$rep mkernel --world 2 --nodes 2 $S
done
python3 $H/tailab.py $L > $L/ab.txt
MKERNEL_REQUIRE_GPUS=2 timeout 200 $H/bin/test-gpu_ag_gemm --test-threads 1 > $L/gpu_ag_gemm.log 2>&1
stamp "gpu_ag_gemm rc=$? $(grep 'test result' $L/gpu_ag_gemm.log)"
MKERNEL_REQUIRE_GPUS=2 timeout 120 $H/bin/test-gpu_gemm_rs --test-threads 1 reduced_tiles_pulled > $L/gpu_gemm_rs.log 2>&1
stamp "gpu_gemm_rs reduced_tiles_pulled rc=$? $(grep 'test result' $L/gpu_gemm_rs.log)"
rem=$((570 - SECONDS))
CUDA_VISIBLE_DEVICES=0 timeout $rem $H/bin/test-gpu_gemm --test-threads 1 stream_k_shapes_and_boundaries > $L/gpu_gemm.log 2>&1
stamp "gpu_gemm stream_k rc=$? (limit ${rem}s) $(grep 'test result' $L/gpu_gemm.log)"
pack
cat $L/ab.txt
