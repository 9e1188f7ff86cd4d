# Unpack the staged binaries (carried as one xz tarball: the 64 MiB carry limit) next to gpu-run.sh.
cd "$(dirname "${BASH_SOURCE[0]}")"
[ -x bin/mkernel ] || python3 -c "import tarfile; tarfile.open('bin.tar.xz').extractall('.')"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
H="$PWD"; L=/tmp/logs; mkdir -p $L; T0=$SECONDS
stamp() { echo "[$((SECONDS - T0))s] $*" | tee -a $L/stamps.txt; }
pack() { stamp "packing"; tar czf "$OUT/logs.tgz" -C $L . ; cp $L/stamps.txt $OUT/ 2>/dev/null; }
