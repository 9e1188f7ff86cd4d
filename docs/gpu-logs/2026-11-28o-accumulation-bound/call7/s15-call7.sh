# Session 15, call 7 (2x H200): the final code (pulled reduced tiles by default at two ranks from
# 128 MiB): figures of record for GEMM + RS / AR at world 2, twice, beside torch_baselines.py
# multi; then the whole gpu_gemm_rs suite.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in "" r2-; do
  for op in gemm-rs gemm-ar; do bb ${rep}$op-w2-n1 $op --world 2; done
done
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
cp $L/torch-multi-w2.jsonl $L/r2-torch-multi-w2.jsonl
python3 $H/summarize-fused.py $L > $L/summary.txt 2>&1; python3 $H/summarize-fused.py $L r2- > $L/summary-r2.txt 2>&1
cat $L/summary.txt $L/summary-r2.txt | grep -v '^$' | cut -c1-200
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
timeout 250 $H/bin/test-gpu_gemm_rs --test-threads 1 > $L/gpu_gemm_rs.log 2>&1
stamp "gpu_gemm_rs rc=$? $(grep 'test result' $L/gpu_gemm_rs.log)"
pack
