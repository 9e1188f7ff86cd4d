# Session 19, call 1 (2x H200): the rank-checks' alternating inputs (every launch back to back and
# every graph replay checked bit for bit against a verified launch of its round), the merged
# ready wait in ag_gemm.rs; a control binary whose flag waits accept the previous epoch from
# epoch 8 on (mkernel-stale), which the alternating checks must catch.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
export MKERNEL_REQUIRE_GPU=1
left() { echo $(( 575 - (SECONDS - T0) )); }
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
ctl() { local name=$1; shift; timeout 90 $H/bin/mkernel launch -n 2 --gpus 0,1 --timeout-s 80 -- $H/bin/mkernel-stale rank-check "$@" > $L/control-$name.log 2>&1; stamp "control $name rc=$? $(grep -m1 -o 'launch [0-9]* of [0-9]* back to back[^\"]*' $L/control-$name.log | head -c 200)"; }
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv > $L/smi.txt
ctl gemm-rs gemm-rs --shape 2000x1544x1024 --back-to-back 20
ctl gemm-ar gemm-ar --shape 2000x1544x1024 --one-shot off --back-to-back 20
ctl moe moe --config 300x256x264x8x2 --back-to-back 20
ctl ag-gemm ag-gemm --shape 2000x1544x1032 --path fused --back-to-back 20
MKERNEL_REQUIRE_GPUS=2 t gpu_gemm_rs 260
MKERNEL_REQUIRE_GPUS=2 t gpu_moe 150
CUDA_VISIBLE_DEVICES=0 t gpu_ag_gemm 40 two_ranks_sharing_one_gpu
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 90 copy_engines_gather --exact
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 100 one_node_two_gpus
MKERNEL_REQUIRE_GPUS=2 t gpu_ag_gemm 100 two_emulated_nodes_one_gpu_each
pack
cat $L/stamps.txt
grep -h 'timed out\|panicked\|differs\|instead of' $L/*.log | head -8
