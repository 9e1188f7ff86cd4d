# Call 2 (x4): the several-node GEMM + RS / AR walk in rounds with a lead (sched::NodeTiles,
# sched::Rounds). gpu_gemm_rs whole (new lead cases at 2 x 2 and 4 x 1, the one-node walk now
# through Rounds); A/B of the lead at 2 emulated nodes x 2 (all = the classes one after the
# other, the old walk; the new default, one wave; two waves; 8 rounds), interleaved twice;
# MoE at 1 x 4 with the tuned table of call 1 beside torch moe, and a finer tune of its runs.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel; W4="CUDA_VISIBLE_DEVICES=0,1,2,3"
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 300 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
b() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
t gpu_gemm_rs
S=16384x8192x8192,16384x4096x8192
for r in 1 2; do
  for lead in all default 115 8; do
    for op in gemm-rs gemm-ar; do
      l=(); [ $lead = default ] || l=(--lead $lead)
      # the all-reduce's compute CTAs are 67: its one wave is 33, two 67
      [ $op = gemm-ar ] && [ $lead = 115 ] && l=(--lead 67)
      b $op-n2-l$lead-$r $op --world 4 --nodes 2 --shapes $S "${l[@]}"
    done
  done
done
b moe-w4-n1 moe --world 4 --nodes 1
env $W4 PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w4.jsonl > $L/torch-moe-w4.log 2>&1; stamp "torch moe w4 rc=$?"
timeout 200 $M tune moe --world 4 --pull-ctas 6,8,10 --run-records 4,8,16 --reps 10 --warmup 3 --rounds 2 --out $L/tune-moe-w4.jsonl > $L/tune-moe-w4.log 2>&1; stamp "tune moe w4 rc=$?"
grep -h "time /\|modelled" $L/gemm-*-n2-*.log | cut -c1-160
grep -hv "rank [123]" $L/moe-w4-n1.log | tail -8
tail -3 $L/tune-moe-w4.log
pack
