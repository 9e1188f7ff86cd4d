# Session 24, call 3 (1x H200): the stream-wait probe (mkernel bench stream-wait): a side
# stream's reaction to a word raised by a kernel holding every SM, by a stream memory wait and by
# a host thread polling, at 50, 200 and 10 us between raises.
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
for p in 50 200 10; do
  timeout 60 $H/bin/mkernel bench stream-wait --raises 40 --period-us $p --runs 3 > $L/sw-$p.log 2>&1; stamp "stream-wait $p rc=$?"
done
pack
cat $L/sw-*.log
