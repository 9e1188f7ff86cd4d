# Session 23, call 4 (4x H200): the first-send stagger where it was never measured (a runtime
# option, HEAD's code): the all-reduce at 1 x 4 and 1 x 2, the reduce-scatter and all-reduce at
# 2 x 2 (two emulated nodes of two), against no stagger, interleaved; NCCL beside (world 4, 2).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-560}
export MKERNEL_REQUIRE_GPU=1
bb() { local tag=$1; shift; local l=$(( LIMIT - SECONDS )); [ $l -gt 90 ] && l=90; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  for ns in 0 2500 1250; do bb ar4-$ns-$rep $H/bin/mkernel bench gemm-ar --world 4 $S --stagger-ns $ns; done
  for ns in 0 2500; do bb ar2-$ns-$rep $H/bin/mkernel bench gemm-ar --world 2 $S --stagger-ns $ns; done
  for ns in 0 2500; do bb rsn-$ns-$rep $H/bin/mkernel bench gemm-rs --world 4 --nodes 2 $S --stagger-ns $ns; done
  for ns in 0 2500; do bb arn-$ns-$rep $H/bin/mkernel bench gemm-ar --world 4 --nodes 2 $S --stagger-ns $ns; done
done
l=$(( LIMIT - SECONDS )); [ $l -gt 100 ] && l=100
[ $l -gt 20 ] && { timeout $l python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"; }
l=$(( LIMIT - SECONDS )); [ $l -gt 100 ] && l=100
[ $l -gt 20 ] && { CUDA_VISIBLE_DEVICES=0,1 timeout $l python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"; }
pack
cat $L/stamps.txt
for f in $L/ar*.log $L/rs*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep -E "op=gemm_ar|op=gemm_rs" $L/torch-multi-w*.log | sed 's/nccl_cublas/seq/' | cut -c1-200
