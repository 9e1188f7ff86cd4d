# Call 1 (x4): dynamic tile claiming in AllGather + GEMM (push CTAs join the GEMM), the ring's
# landed wait moved one step later (rings whose every hop crosses nodes), the all-gather's
# copy `auto` (fan above two local ranks). Tests: gpu_ag_gemm, gpu_ring_attention, gpu_comm.
# Bench: ag-gemm join vs --no-join interleaved at 1 x 4 (and push 8 / 12 / 16 with join), 2 x 2
# once each; the all-gather auto vs bulk; torch multi at world 4.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local b=$1; shift; timeout 170 $H/bin/test-$b --test-threads=1 --nocapture "$@" > $L/test-$b.log 2>&1; stamp "test $b rc=$? $(grep -E '^test result' $L/test-$b.log | tail -1)"; }
t gpu_ag_gemm
t gpu_ring_attention
S4="16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
ag() { local tag=$1; shift; timeout 60 $M bench ag-gemm --world 4 --shapes $S4 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; grep -E "overlap eff" $L/$tag.log | cut -c10-70; }
for r in 1 2; do
  ag ag-n1-join-$r --nodes 1
  ag ag-n1-nojoin-$r --nodes 1 --no-join
done
for p in 8 12 16; do ag ag-n1-join-p$p --nodes 1 --push-ctas $p; done
ag ag-n2-join --nodes 2
ag ag-n2-nojoin --nodes 2 --no-join
env $W4 PYTHONUNBUFFERED=1 timeout 100 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
for c in auto bulk; do
  timeout 40 $M launch -n 4 --nodes 1 --timeout-s 35 -- $M bench allgather --intra-ctas 16 --copy $c --json $L/allgather-w4-$c.jsonl > $L/allgather-w4-$c.log 2>&1; stamp "allgather w4 $c rc=$?"
  grep -E "268435456" $L/allgather-w4-$c.log | cut -c1-110
done
t gpu_comm
pack
