# Call 3 (x4), binaries of call 2: tune gemm-rs / gemm-ar at 2 emulated nodes x 2 on the new
# walk (its table lines there were measured on the old one): inter-reduce CTAs x tiles per WRITE,
# two rounds; ring attention at 1 x 4 with 2 / 4 / 8 comm CTAs, interleaved twice.
source "$(dirname "$0")/prep.sh"
export MKERNEL_REQUIRE_GPU=1 MKERNEL_REQUIRE_GPUS=4
M=$H/bin/mkernel
S=16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096
timeout 240 $M tune gemm-rs --world 4 --nodes 2 --shapes $S --inter-reduce 16,32 --groups 8,16,32 --reps 10 --warmup 3 --rounds 2 --out $L/tune-rs-n2.jsonl > $L/tune-rs-n2.log 2>&1; stamp "tune rs n2 rc=$?"
timeout 240 $M tune gemm-ar --world 4 --nodes 2 --shapes $S --inter-reduce 32,64 --groups 8,16,32 --reps 10 --warmup 3 --rounds 2 --out $L/tune-ar-n2.jsonl > $L/tune-ar-n2.log 2>&1; stamp "tune ar n2 rc=$?"
for r in 1 2; do for c in 2 4 8; do
  timeout 100 $M bench ring-attention --world 4 --comm-ctas $c --json $L/ring-c$c-$r.jsonl > $L/ring-c$c-$r.log 2>&1; stamp "ring c$c-$r rc=$?"
done; done
grep -h '"op"' $L/tune-*-n2.jsonl | cut -c1-400
grep -h "of one block" $L/ring-c*.log | cut -c1-150
pack
