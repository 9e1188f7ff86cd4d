# Session 13, call 2 (4x H200), dddc19c: (1) the rule's edges: `--copy ce` against the SMs at 8 MiB
# shards (world 4) and 64 MiB shards (world 2); (2) figures of record beside torch_baselines.py
# multi: bench allgather (auto), bench ag-gemm at 1 x 4, 2 x 2 and world 2; bench gemm on the
# issue's 7 shapes against cuBLAS; (3) gpu_comm on 4 GPUs at the final rule.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
bb() { local tag=$1; shift; timeout 150 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
two() { CUDA_VISIBLE_DEVICES=0,1 "$@"; }
for rep in a b; do
  bb ag-w4-edge-ce-$rep $M bench allgather --world 4 --sizes 16M,32M --copy ce
  bb ag-w4-edge-fan-$rep $M bench allgather --world 4 --sizes 16M,32M --copy fan
  bb ag-w4-edge-lsu-$rep $M bench allgather --world 4 --sizes 16M,32M --copy lsu
  two bb ag-w2-edge-ce-$rep $M bench allgather --world 2 --sizes 128M --copy ce
  two bb ag-w2-edge-lsu-$rep $M bench allgather --world 2 --sizes 128M --copy lsu
  two bb ag-w2-edge-ceip-$rep $M bench allgather --world 2 --sizes 256M --copy ce --in-place
done
for rep in a b; do
  bb ag-w4-auto-$rep $M bench allgather --world 4 --sizes 1M,16M,256M
  bb ag-w4-autoip-$rep $M bench allgather --world 4 --sizes 256M --in-place
  two bb ag-w2-auto-$rep $M bench allgather --world 2 --sizes 1M,16M,256M
done
python3 $H/agsum.py $L | tee $L/ag.txt
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w4.jsonl > $L/torch-multi-w4.log 2>&1; stamp "torch multi w4 rc=$?"
two env PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py multi --json $L/torch-multi-w2.jsonl > $L/torch-multi-w2.log 2>&1; stamp "torch multi w2 rc=$?"
bb agg-w4-n1 $M bench ag-gemm --world 4
bb agg-w4-n2 $M bench ag-gemm --world 4 --nodes 2
two bb agg-w2-n1 $M bench ag-gemm --world 2
two bb agg-w2-n2 $M bench ag-gemm --world 2 --nodes 2
CUDA_VISIBLE_DEVICES=0 bb gemm7 $M bench gemm --shapes 8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048,12288x12288x12288,4096x14336x4096,16384x1536x8192
for f in agg-w4-n1 agg-w4-n2 agg-w2-n1 agg-w2-n2 gemm7; do echo "== $f"; tail -12 $L/$f.log; done
export MKERNEL_REQUIRE_GPU=1
MKERNEL_REQUIRE_GPUS=4 timeout 200 $H/bin/test-gpu_comm --test-threads=1 > $L/gpu_comm.log 2>&1; stamp "gpu_comm rc=$? $(grep -h '^test result' $L/gpu_comm.log | tail -1 | cut -c1-90)"
grep -h "^0\.\|^1\.\|^  \|GB/s" $L/torch-multi-w4.log | head -5
pack
