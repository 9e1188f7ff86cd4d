# Session 7, call 10 (2x H200, the machine of call 9 still warm): bench moe at world 2 (both
# configs, the tuned defaults) twice, then torch_baselines.py moe, HEAD's binary (7691c54).
source .gpu-all/prep.sh >/dev/null; rm -f $L/*; M=$H/bin/mkernel
for i in 1 2; do timeout 60 $M bench moe --world 2 --nodes 1 --json $L/moe-w2-$i.jsonl > $L/moe-w2-$i.log 2>&1; stamp "moe w2 $i rc=$?"; done
PYTHONUNBUFFERED=1 timeout 150 python3 $H/torch_baselines.py moe --json $L/torch-moe-w2.jsonl > $L/torch-moe-w2.log 2>&1; stamp "torch moe rc=$?"
pack
