# Session 12, call 3 (2x H200): (1) GEMM + RS / AR at world 2, fused / GEMM alone, three device
# codes interleaved three times: main before this session (one `staged` arrival), HEAD (every
# thread arrives), HEAD without the named barriers before the arrival (nobar); (2) every op's wait
# now goes through the bounded host wait: the other ops' GPU test binaries at world 2 (4- and
# 8-GPU cases skip: no 4-GPU machine lent).
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1 bin=$2; shift 2; timeout 100 $bin bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for rep in a b c; do
  for v in main every nobar; do bin=$H/bin/mkernel-$v; [ $v = every ] && bin=$H/bin/mkernel
    for op in gemm-ar gemm-rs; do bb $v-$rep-$op-w2 $bin $op --world 2; done
  done
done
python3 $H/ab.py $L | tee $L/ab.txt
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=2
for t in gpu_attention gpu_gemm_gather gpu_gemm gpu_selftest gpu_soak gpu_ring_attention gpu_comm gpu_ag_gemm; do
  timeout 200 $H/bin/test-$t --test-threads=1 > $L/$t.log 2>&1; stamp "$t rc=$? $(grep -h '^test result' $L/$t.log | tail -1 | cut -c1-90)"
done
grep -h "skipped" $L/*.log | sort | uniq -c | cut -c1-150
pack
