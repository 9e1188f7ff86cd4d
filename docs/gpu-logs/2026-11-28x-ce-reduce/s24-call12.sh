# Session 24, call 12 (2x H200): the all-reduce with the engines in bands of 4 tile rows (so the
# pushed last band is half as long), tails 1 and 2, against the default, at 1 x 2, two rounds.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
bb() { local tag=$1; shift; timeout 60 "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
S="--shapes 16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192"
for rep in a b; do
  bb gemm-ar-def-$rep $H/bin/mkernel bench gemm-ar --world 2 $S
  bb gemm-ar-g4t1-$rep $H/bin/mkernel bench gemm-ar --world 2 $S --engines on --group-m 4
  bb gemm-ar-g4t2-$rep $H/bin/mkernel bench gemm-ar --world 2 $S --engines on --group-m 4 --engine-tail 2
done
pack
cat $L/stamps.txt
for f in $L/gemm-*.log; do echo "$(basename $f .log) $(grep -E 'mkernel-fused' $f | awk '{print $8}' | tr '\n' ' ') | alone $(grep -E 'gemm-alone' $f | awk '{print $8}' | tr '\n' ' ')"; done
