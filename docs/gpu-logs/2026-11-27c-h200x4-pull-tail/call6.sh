# Call 6 (x4): push CTAs 4 / 5 / 6 / 8 with the stream-K tail at the two N = 4096 shapes, 1 x 4,
# interleaved twice; the figures of record at the defaults (tail on a static walk only), 1 x 4
# and 2 x 2, beside torch multi; the all-gather's fan / pull and the copy engines at world 4 and
# 2; gpu_ag_gemm with the tail cases.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 250 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
bb() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for r in 1 2; do
  for p in 4 5 6 8; do bb sweep-p$p-$r ag-gemm --world 4 --nodes 1 --shapes 16384x4096x8192,32768x4096x8192 --push-ctas $p; done
done
bb ag-w4-n1 ag-gemm --world 4 --nodes 1
bb ag-w4-n2 ag-gemm --world 4 --nodes 2
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
for c in fan pull; do for n in 16 24; do bb agx-w4-$c-c$n allgather --world 4 --sizes 256M --copy $c --intra-ctas $n; done; done
bb agx-w2-bulk-c16 allgather --world 2 --sizes 256M --copy bulk --intra-ctas 16
bb agx-w2-pull-c24 allgather --world 2 --sizes 256M --copy pull --intra-ctas 24
t gpu_ag_gemm
for f in $L/sweep-*.log; do echo "$(basename $f .log): $(grep -hE 'overlap eff' $f | grep -v 'rank [123]' | sed 's/.*efficiency *//' | cut -c1-8 | tr '\n' ' ')"; done
for f in $L/agx-*.log; do echo "$(basename $f .log): $(grep -hE '^.rank 0. all_gather' $f | awk '{print $7, $8, $(NF-1)}' | tr '\n' ' ')"; done
pack
