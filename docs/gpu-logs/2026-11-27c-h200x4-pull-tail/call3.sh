# Call 3 (x4): the copy engines doing a whole all-gather (one stream per peer, at once) beside the
# one-peer copy and our fan / pull, 256 MiB; a diagnostic build with 10 of the ring's 12 stages
# loading ahead (mkernel-a10) against 6, interleaved twice.
source "$(dirname "$0")/prep.sh"
ag() { local bin=$1 tag=$2; shift 2; timeout 60 $H/bin/$bin bench allgather --sizes 256M "$@" --json $L/$tag.jsonl > $L/$tag.log 2>&1; stamp "$tag rc=$?"; }
rm -f $L/*.log $L/*.jsonl
for r in 1 2; do
  ag mkernel w4-fan-$r --world 4 --copy fan --intra-ctas 16
  ag mkernel w4-pull-$r --world 4 --copy pull --intra-ctas 16
  ag mkernel-a10 w4-fan-a10-$r --world 4 --copy fan --intra-ctas 16
  ag mkernel-a10 w4-pull-a10-$r --world 4 --copy pull --intra-ctas 16
  ag mkernel-a10 w4-pull-a10-c24-$r --world 4 --copy pull --intra-ctas 24
done
ag mkernel w2-bulk --world 2 --copy bulk --intra-ctas 16
ag mkernel-a10 w2-pull-a10 --world 2 --copy pull --intra-ctas 16
ag mkernel-a10 w2-pull-a10-c24 --world 2 --copy pull --intra-ctas 24
ag mkernel w3-fan --world 3 --copy fan --intra-ctas 16
for f in $L/w*.log; do echo "$(basename $f .log): $(grep -hE '^.rank 0. all_gather' $f | awk '{print $7, $8, $(NF-1)}' | tr '\n' ' ')"; done
pack
