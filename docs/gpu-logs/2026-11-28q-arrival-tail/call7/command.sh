# Session 17, call 7 (4x H200, call 6's warm machine, 2c62629's binaries): two ways against four
# at the default's two rows, 2 emulated nodes x 1, the default's two shapes, interleaved twice.
# The third variant (4 rows x 4 ways) passed --tail-rows twice and was refused by clap (its
# logs say so); it gave no figures.
source .gpu-all/prep.sh >/dev/null; rm -rf $L/*; mkdir -p $L; S="--shapes 16384x4096x8192,32768x4096x8192"; for rep in a b; do for v in "r2w2:--tail-ways 2" "r2w4:--tail-ways 4" "r4w4:--tail-rows 4 --tail-ways 4"; do n=${v%%:*}; a=${v#*:}; CUDA_VISIBLE_DEVICES=0,1 timeout 20 $H/bin/mkernel bench ag-gemm --world 2 --nodes 2 $S --tail-rows 2 $a --json $L/n2w2-$n-$rep.jsonl > $L/n2w2-$n-$rep.log 2>&1; done; done; python3 $H/tailab.py $L | tee $L/ab.txt; pack
