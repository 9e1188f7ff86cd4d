# Session 18, call 3a (1x H200: the only kind lent then): --engines smoke on two ranks sharing
# GPU 0 (peers through CUDA IPC on one device; one node, and two emulated nodes of one rank).
source "$(dirname "$0")/prep.sh"
rm -rf $L/*; mkdir -p $L
M=$H/bin/mkernel
c() { local tag=$1; shift; timeout 120 $M launch -n 2 --gpus 0,0 "$@" > $L/$tag.log 2>&1; stamp "$tag rc=$? $(tail -1 $L/$tag.log | cut -c1-150)"; }
c n1-small --nodes 1 -- $M rank-check ag-gemm --engines true --shape 512x264x136 --rounds 2 --back-to-back 10
c n1-graph --nodes 1 -- $M rank-check ag-gemm --engines true --shape 2000x1544x1032 --layout nk --chunk-rows 48 --graph --back-to-back 10
c n1-pieces --nodes 1 -- $M rank-check ag-gemm --engines true --shape 8192x8x4096 --chunk-rows 96 --rounds 2 --graph
c n1-inplace --nodes 1 -- $M rank-check ag-gemm --engines true --shape 2000x8x72 --in-place --f32
c n2-small --nodes 2 -- $M rank-check ag-gemm --engines true --shape 512x264x136 --rounds 2 --graph
c n2-inplace --nodes 2 -- $M rank-check ag-gemm --engines true --shape 2000x1544x1032 --in-place
c n1-err --nodes 1 -- $M rank-check ag-gemm --engines true --spread true --shape 512x264x136
c n2-pieces --nodes 2 -- $M rank-check ag-gemm --engines true --shape 8192x8x4096 --chunk-rows 96 --back-to-back 10
pack
