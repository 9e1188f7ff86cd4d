# Session 18, call 5 (2x H200): the copy engines' gather with the local copy on a stream of its
# own and pieces of up to 64 MiB: gpu_ag_gemm copy_engines_gather and two_ranks_sharing_one_gpu;
# bench ag-gemm sm against ce at world 2, three rounds interleaved; the standalone all-gather on
# the copy engines at the same bytes.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 120 copy_engines_gather --exact
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 60 two_ranks_sharing_one_gpu
bb() { local tag=$1; shift; timeout 120 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b c; do
  bb n1w2-sm-$rep $M bench ag-gemm --world 2 --engines false
  bb n1w2-ce-$rep $M bench ag-gemm --world 2 --engines true
done
bb agce $M bench allgather --world 2 --sizes 128M,256M,512M --copy ce
python3 $H/s18ab.py > $L/ab.txt
pack
cat $L/ab.txt
grep -E 'mkernel |copy-engine' $L/agce.log | awk '{print $3, $5, $6, $7, $8}'
