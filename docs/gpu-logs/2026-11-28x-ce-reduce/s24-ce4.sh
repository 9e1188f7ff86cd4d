# Session 24 (4x H200): GEMM + RS / AR with the copy engines moving the partials and the
# all-reduce's reduced blocks (--engines on) against the default (owners pulling, prefetched;
# the all-reduce pulling reduced tiles), at 1 x 4: the stream-wait probe with copies into GPU 1
# (8 and 2 MiB), one rank-check per collective with the engines (if either fails, no engine
# benches), three interleaved rounds of the four large shapes (default / engines / engines with
# bands of 4 tile rows / engines with leads of 256 and 512 rounds), torch_baselines.py multi at
# world 4, then gpu_gemm_rs copy_engines in the time left.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
LIMIT=${LIMIT:-520}
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
W=${W:-4}
bb() { local tag=$1; shift; local l=$(( LIMIT - 130 - SECONDS )); [ $l -gt 60 ] && l=60; [ $l -le 5 ] && { stamp "$tag skipped"; return; }
  timeout $l "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
for mib in 8 2; do timeout 40 $H/bin/mkernel bench stream-wait --raises 40 --period-us 50 --runs 2 --peer-mib $mib > $L/sw-peer-$mib.log 2>&1; stamp "stream-wait peer $mib MiB rc=$?"; done
G=$(seq -s, 0 $((W-1)))
ok=1
for op in gemm-rs gemm-ar; do
  timeout 90 $H/bin/mkernel launch -n $W --gpus $G --timeout-s 80 -- $H/bin/mkernel rank-check $op --engines on --one-shot off --shape 16384x4096x8192 --back-to-back 10 --timeout-ms 10000 > $L/rc-$op.log 2>&1; rc=$?; stamp "rank-check $op engines rc=$rc"; [ $rc -ne 0 ] && ok=0
done
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b c; do
  for op in gemm-rs gemm-ar; do
    bb $op-def-$rep $H/bin/mkernel bench $op --world $W $S
    [ $ok -eq 1 ] || continue
    bb $op-ce-$rep $H/bin/mkernel bench $op --world $W $S --engines on
    bb $op-ce4-$rep $H/bin/mkernel bench $op --world $W $S --engines on --group-m 4
    bb $op-cel256-$rep $H/bin/mkernel bench $op --world $W $S --engines on --lead 256
    bb $op-cel512-$rep $H/bin/mkernel bench $op --world $W $S --engines on --lead 512
  done
done
l=$(( LIMIT - 30 - SECONDS )); [ $l -gt 100 ] && l=100
[ $l -gt 20 ] && { timeout $l python3 $H/torch_baselines.py multi --json $L/torch-multi-w$W.jsonl > $L/torch-multi-w$W.log 2>&1; stamp "torch multi w$W rc=$?"; }
l=$(( LIMIT - 15 - SECONDS ))
[ $l -gt 30 ] && { timeout $l $H/bin/test-gpu_gemm_rs --exact copy_engines --nocapture > $L/test-ce.log 2>&1; stamp "test copy_engines rc=$?"; }
pack
cat $L/stamps.txt
grep -E "test result|panicked|FAILED" $L/test-ce.log 2>/dev/null | head -5
grep -h " ok:\|error\|Error" $L/rc-*.log | head -6 | cut -c1-200
grep -h "run " $L/sw-peer-*.log | cut -c1-190
for f in $L/gemm-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
grep -E "op=gemm_ar|op=gemm_rs" $L/torch-multi-w$W.log | sed 's/nccl_cublas/seq/' | cut -c1-200
