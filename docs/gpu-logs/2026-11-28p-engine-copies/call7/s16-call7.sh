# Session 16, call 7 (2x H200, same machine as call 6): where pulling the all-reduce's reduced tiles starts to pay at two
# ranks (PULL_REDUCED_MIN_BYTES is 128 MiB; nothing between 16 and 128 MiB was measured):
# pushed against pulled, interleaved twice, partials of 16 to 128 MiB.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
bb() { local tag=$1; shift; timeout 90 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 4096x4096x16384,16384x4096x16384,8192x8192x4096,6144x4096x8192,8192x4096x8192"
for rep in a b; do
  bb push-$rep-gemm-ar-w2 gemm-ar --world 2 $S --pull-reduced off
  bb pull-$rep-gemm-ar-w2 gemm-ar --world 2 $S --pull-reduced on
done
python3 $H/ab.py $L | tee $L/ab.txt
pack
