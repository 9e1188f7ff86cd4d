# Call 5 (x4), binaries of call 4: gpu_moe with the new world-4 table (pull 8, runs of 16); the
# several-node walk's head and tail at 2 emulated nodes x 2: lead 8 and 8 or 16 tiles per WRITE
# against the defaults (one wave, call 3's table), interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
t() { local bin=$1 tag=$1${2:+-$2}; shift; timeout 200 $H/bin/test-$bin --test-threads=1 --nocapture "$@" > $L/test-$tag.log 2>&1; stamp "test $tag rc=$?"; grep -E "^test result" $L/test-$tag.log | tail -1; }
b() { local tag=$1; shift; timeout 100 $M bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192
for r in 1 2; do
  for op in gemm-rs gemm-ar; do
    b $op-def-$r $op --world 4 --nodes 2 --shapes $S
    b $op-l8g8-$r $op --world 4 --nodes 2 --shapes $S --lead 8 --group 8
    b $op-l8g16-$r $op --world 4 --nodes 2 --shapes $S --lead 8 --group 16
  done
done
t gpu_moe
for f in $L/gemm-*.log; do echo "$(basename $f): $(grep -h 'modelled' $f | grep -v 'rank [123]' | sed 's/.* = //' | tr '\n' ' ')"; done
pack
