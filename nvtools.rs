// Where build.rs and tests/ptx.rs look for NVIDIA's tools (ptxas, cuobjdump, nvdisasm), in this
// order: `MKERNEL_NVTOOLS`, scripts/setup.sh's `target/nvtools/bin` (PyPI wheels), `CUDA_HOME/bin`,
// `/usr/local/cuda/bin`, then `PATH`. Both `include!` this file: one list, one order.

/// NVIDIA's tool `name` for the crate at `root`: the first found in the order above.
fn nvtool(root: &std::path::Path, name: &str) -> Option<std::path::PathBuf> {
    use std::path::PathBuf;
    let mut dirs: Vec<PathBuf> = Vec::new();
    dirs.extend(std::env::var_os("MKERNEL_NVTOOLS").map(PathBuf::from));
    dirs.push(root.join("target/nvtools/bin"));
    dirs.extend(std::env::var_os("CUDA_HOME").map(|h| PathBuf::from(h).join("bin")));
    dirs.push("/usr/local/cuda/bin".into());
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().map(|d| d.join(name)).find(|p| p.is_file())
}
