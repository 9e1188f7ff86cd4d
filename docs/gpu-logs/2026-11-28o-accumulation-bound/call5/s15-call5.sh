# Session 15, call 5 (2x H200): the movers with the own tiles spread over the launch (a lead
# below "every send first"), against the helpers pushing, fused / GEMM alone, interleaved twice.
source "$(dirname "$0")/prep.sh"
bb() { local tag=$1; shift; timeout 100 $H/bin/mkernel bench "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$? $(grep -m1 -i 'error' $L/$tag.log | cut -c1-200)"; }
S="--shapes 16384x4096x8192,8192x8192x8192,16384x8192x8192"
for rep in a b; do
  bb m0-$rep-gemm-ar-w2 gemm-ar --world 2 $S
  for lead in 0 128 512; do
    bb m0L$lead-$rep-gemm-ar-w2 gemm-ar --world 2 $S --lead $lead
    bb m4L$lead-$rep-gemm-ar-w2 gemm-ar --world 2 $S --lead $lead --movers 4
    bb m8L$lead-$rep-gemm-ar-w2 gemm-ar --world 2 $S --lead $lead --movers 8
  done
done
python3 $H/ab.py $L | tee $L/ab.txt
pack
