# Session 16, call 11 (2x H200): the review's one place for a half tile's TMA boxes
# (gemm::epilogue::half_tile_boxes, used by tma_store_cols and the pulled reduced tiles' load):
# gpu_gemm, gpu_gemm_rs reduced_tiles_pulled, and the plain GEMM bench against the binary before.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
timeout 50 $H/bin/test-gpu_gemm --test-threads 1 > $L/gpu_gemm.log 2>&1
stamp "gpu_gemm rc=$? $(grep 'test result' $L/gpu_gemm.log)"
timeout 50 $H/bin/test-gpu_gemm_rs --test-threads 1 reduced_tiles_pulled > $L/rtp.log 2>&1
stamp "reduced_tiles_pulled rc=$? $(grep 'test result' $L/rtp.log)"
S="--shapes 8192x8192x8192,16384x4096x8192 --layouts nk"
timeout 30 $H/bin/mkernel bench gemm $S --json $L/new.jsonl > $L/new.log 2>&1; stamp "new rc=$?"
timeout 30 $H/bin/mkernel-old bench gemm $S --json $L/old.jsonl > $L/old.log 2>&1; stamp "old rc=$?"
python3 -c "
import json
for f in ['new','old']:
    for l in open('$L/'+f+'.jsonl'):
        x=json.loads(l); print(f, x['shape'], x['layout'], x['impl'], round(x['ms'],4))
" | tee $L/ab.txt
pack
