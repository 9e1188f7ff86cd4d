# Session 18, call 4 (2x H200: the four-GPU kind was withdrawn): the copy engines' gather with the
# walk in their order; gpu_ag_gemm copy_engines_gather; figures beside torch_baselines.py multi at
# world 2: bench ag-gemm push CTAs (sm) against the copy engines (ce) at 1 x 2, the default at
# 2 x 1; round a after the host barrier, round b after the device barrier.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 120 copy_engines_gather --exact
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
for rep in a b; do
  X=""; [ $rep = b ] && X="--device-barrier"
  bb() { local tag=$1; shift; timeout 120 "$@" $X --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
  bb n1w2-sm-$rep $M bench ag-gemm --world 2 --engines false
  bb n1w2-ce-$rep $M bench ag-gemm --world 2 --engines true
  bb n2w2-sm-$rep $M bench ag-gemm --world 2 --nodes 2
done
python3 $H/s18ab.py > $L/ab.txt
pack
cat $L/ab.txt
