# Session 13, call 7 (4x H200): the copy engines' out-of-place all-gather with its local copy on
# the SMs (32 CTAs on a second stream; working tree after the PERF commit) against HEAD (the
# local copy by the copy engines on that stream, `mkernel-old`), 64 and 256 MiB at world 4 and
# 256 MiB at world 2, interleaved three times, in place once as the ceiling; then gpu_comm on 4 GPUs.
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1; shift; timeout 100 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
two() { CUDA_VISIBLE_DEVICES=0,1 "$@"; }
for rep in a b c; do
  bb ag-w4-ce-old-$rep $H/bin/mkernel-old bench allgather --world 4 --sizes 64M,256M --copy ce
  bb ag-w4-ce-sm-$rep $H/bin/mkernel bench allgather --world 4 --sizes 64M,256M --copy ce
  two bb ag-w2-ce-old-$rep $H/bin/mkernel-old bench allgather --world 2 --sizes 256M --copy ce
  two bb ag-w2-ce-sm-$rep $H/bin/mkernel bench allgather --world 2 --sizes 256M --copy ce
done
bb ag-w4-ceip-x $H/bin/mkernel bench allgather --world 4 --sizes 64M,256M --copy ce --in-place
two bb ag-w2-ceip-x $H/bin/mkernel bench allgather --world 2 --sizes 256M --copy ce --in-place
python3 $H/agsum.py $L | grep -v "copy-engine-allgather " | tee $L/ag.txt
MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4 timeout 200 $H/bin/test-gpu_comm --test-threads=1 --nocapture > $L/gpu_comm.log 2>&1; stamp "gpu_comm rc=$? $(grep -h '^test result' $L/gpu_comm.log | tail -1 | cut -c1-90)"
pack
