# Session 18, call 9 (2x H200), after the review: the side streams' work queued before the fused
# launch, the diag checked before enqueueing, the streams joined after a failed enqueue; the
# engine tests with --path fused: gpu_ag_gemm copy_engines_gather, two_ranks_sharing_one_gpu;
# bench ag-gemm sm against ce at world 2, once.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
export MKERNEL_REQUIRE_GPU=1
t() { local name=$1 lim=$2; shift 2; timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 120 copy_engines_gather --exact
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 60 two_ranks_sharing_one_gpu
bb() { local tag=$1; shift; timeout 60 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
bb n1w2-sm-a $M bench ag-gemm --world 2 --engines false
bb n1w2-ce-a $M bench ag-gemm --world 2 --engines true
python3 $H/s18ab.py > $L/ab.txt
pack
grep -h 'path Fused\|path Unfused' $L/gpu_ag_gemm-copy_engines_gather.log | sed 's/.*path \(\w*\).*/\1/' | sort | uniq -c
grep -v gemm-alone $L/ab.txt
