# Call 9 (x4): `tune moe` at 1 x 4 the DeepSeek-like config, more pull CTAs with shorter runs (pull CTAs x runs near 120 records were best in call 8)
# three rounds.
source "$(dirname "$0")/prep.sh"
M=$H/bin/mkernel
rm -f $L/*.log $L/*.jsonl
timeout 280 $M tune moe --world 4 --nodes 1 --configs 4096x7168x2048x256x8 --pull-ctas 10,12,14,16 --run-records 6,8,10,12 --rounds 3 --out $L/tune-moe-w4.jsonl > $L/tune-moe-w4.log 2>&1; stamp "tune rc=$?"
grep -E "^\[rank 0\] \{" $L/tune-moe-w4.log | tail -4
python3 - <<'PY'
import re
pts={}
for l in open('/tmp/logs/tune-moe-w4.log'):
    m=re.search(r'tune moe (\S+) pull (\d+) run (\d+) round (\d+): fused ([\d.]+)', l)
    if m: pts.setdefault((m[1],int(m[2]),int(m[3])),[]).append(float(m[5]))
for k in sorted(pts): print(k, ' '.join(f'{x:.3f}' for x in pts[k]))
PY
pack
