# Session 20, call 2 (4x H200): (1) the 2 x 2 miss at 16384x4096x8192: fewer push / forward CTAs,
# in place with the copy engines, larger chunks; (2) the copy engines' gather at 1 x 4 on the final
# engines code against the copy engines' own all-gather; (3) the four-GPU AllGather + GEMM test
# functions under the alternating checks, run to their end.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
left() { echo $(( 580 - (SECONDS - T0) )); }
bb() { local tag=$1; shift; timeout 60 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x4096x8192,32768x4096x8192"
for rep in a b; do
  bb n2-def-$rep $M bench ag-gemm --world 4 --nodes 2 $S
  bb n2-p4-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 4
  bb n2-p2-$rep $M bench ag-gemm --world 4 --nodes 2 $S --push-ctas 2
  bb n2-f1-$rep $M bench ag-gemm --world 4 --nodes 2 $S --fwd-ctas 1
  bb n2-c128-$rep $M bench ag-gemm --world 4 --nodes 2 $S --chunk-rows 128
  bb n2-ip-$rep $M bench ag-gemm --world 4 --nodes 2 $S --in-place
  bb n2-ipce-$rep $M bench ag-gemm --world 4 --nodes 2 $S --in-place --engines true
done
S4="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb n1-sm-$rep $M bench ag-gemm --world 4 $S4 --device-barrier
  bb n1-ce-$rep $M bench ag-gemm --world 4 $S4 --engines true --device-barrier
  bb n1-agce-$rep $M bench allgather --world 4 --sizes 128M,256M,512M --copy ce --device-barrier
done
python3 $H/s20sum.py > $L/sum.txt 2>&1
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
t() { local name=$1 lim=$2; shift 2; local l=$(left); [ $l -lt $lim ] && lim=$l; [ $lim -le 5 ] && { stamp "$name $1 skipped: no time"; return; }
  timeout $lim $H/bin/test-$name --test-threads 1 "$@" > $L/$name-${1:-all}.log 2>&1; stamp "$name ${1:-all} rc=$? (limit ${lim}s) $(grep 'test result' $L/$name-${1:-all}.log)"; }
t gpu_ag_gemm 250 four_gpus_one_node_and_two_nodes
t gpu_ag_gemm 250 copy_engines_gather_four_gpus
pack
cat $L/sum.txt
cat $L/stamps.txt | grep -v "rc=0$"
