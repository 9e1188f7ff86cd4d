# Session 10, call 8 (2x H200): bench ag-gemm's records name the unfused all-gather's copy and CTAs.
source "$(dirname "$0")/prep.sh"
timeout 90 $H/bin/mkernel bench ag-gemm --world 2 --shapes 2048x4096x4096,16384x4096x8192 --json $L/ag-w2.jsonl > $L/ag-w2.log 2>&1; stamp "ag-gemm rc=$?"
python3 -c "
import json
for l in open('$L/ag-w2.jsonl'):
    r=json.loads(l)
    print(r['shape'], r['impl'], round(r['ms'],4), r.get('unfused_ag_copy'), r.get('unfused_ag_ctas'), r.get('overlap_efficiency'))
"
pack
