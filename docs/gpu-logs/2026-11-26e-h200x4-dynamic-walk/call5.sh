# Call 5 (x4): the tile walk as a launch-time choice: static shares, dynamic (claimed from the
# counter), dynamic with the push CTAs joining; interleaved twice at 1 x 4 and 2 x 2, beside
# torch multi; gpu_ag_gemm with the new defaults (static on one node, dynamic + join across).
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local b=$1; shift; timeout 170 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
S4="16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
ag() { local tag=$1; shift; timeout 60 $M bench ag-gemm --world 4 --shapes $S4 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; grep -oE "overlap efficiency [0-9.]*|inter-node [0-9.-]*" $L/$tag.log | awk '{print $NF}' | tr '\n' ' '; echo; }
for r in 1 2; do for n in 1 2; do
  ag ag-n$n-static-$r --nodes $n --dynamic false
  ag ag-n$n-dyn-$r --nodes $n --dynamic true --join false
  ag ag-n$n-join-$r --nodes $n --dynamic true --join true
done; done
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
t gpu_ag_gemm
pack
