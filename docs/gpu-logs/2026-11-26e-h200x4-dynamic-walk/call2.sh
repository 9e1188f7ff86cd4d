# Call 2 (x4): claim-ahead in the dynamic tile walk. Bench: ag-gemm --claim-ahead 0 / 4 / 8
# interleaved twice at 1 x 4, once at 2 x 2; the plain GEMM (opaque epilogue addresses) beside
# cuBLAS on the 7 shapes; torch multi at world 4. Tests: gpu_ag_gemm, gpu_gemm, gpu_selftest,
# gpu_attention.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local b=$1; shift; timeout 170 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
S4="16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
ag() { local tag=$1; shift; timeout 60 $M bench ag-gemm --world 4 --shapes $S4 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; grep -E "overlap eff" $L/$tag.log | cut -c10-70; }
for r in 1 2; do for a in 0 4 8; do ag ag-n1-a$a-$r --nodes 1 --claim-ahead $a; done; done
for a in 0 4; do ag ag-n2-a$a --nodes 2 --claim-ahead $a; done
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
CUDA_VISIBLE_DEVICES=0 timeout 120 $M bench gemm --shapes 8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192 --json $L/gemm.jsonl > $L/gemm.log 2>&1; stamp "bench gemm rc=$?"
grep -E "ratio|vs cuBLAS|x cuBLAS" $L/gemm.log | head -20
t gpu_ag_gemm
t gpu_gemm
t gpu_selftest
t gpu_attention
pack
