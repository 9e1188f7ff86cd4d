//! Compiles `device/` to one sm_90a PTX module with rustc's own NVPTX backend and embeds it
//! (`OUT_DIR/mkernel.ptx`, included by `host/gpu/kernels.rs`), and, where NVIDIA's `ptxas` is
//! found, the module assembled for sm_90a too (`OUT_DIR/mkernel.cubin`): loading it takes
//! milliseconds where the driver's JIT takes 15-20 s per process on a cold cache. Without
//! `ptxas` the cubin is empty and the host JIT-compiles the PTX.
//!
//! The device build is a nested cargo invocation with its own target directory, run under the
//! toolchain pinned in rust-toolchain.toml, with the host build's compiler variables removed (they
//! would point it at the host's `core`). The link step is `device/ptx-link.sh`; its hash is part
//! of the device rustflags, so changing it (or any flag here) rebuilds the module.
use std::collections::hash_map::DefaultHasher;
use std::env;
use std::fs;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::process::Command;

const TARGET: &str = "nvptx64-nvidia-cuda";
const CPU: &str = "sm_90a";
const INSTALL_HINT: &str = "scripts/setup.sh installs it, or: rustup toolchain install \
     nightly-2026-05-20 --profile minimal -c rust-src -c llvm-tools";

fn main() {
    let root = PathBuf::from(env::var("CARGO_MANIFEST_DIR").unwrap());
    let out_dir = PathBuf::from(env::var("OUT_DIR").unwrap());
    for p in [
        "device/src",
        "device/Cargo.toml",
        "device/ptx-link.sh",
        "rust-toolchain.toml",
        "Cargo.toml",
        "build.rs",
        "nvtools.rs",
    ] {
        println!("cargo:rerun-if-changed={}", root.join(p).display());
    }
    println!("cargo:rerun-if-env-changed=MKERNEL_DEVICE_TOOLCHAIN");
    println!("cargo:rerun-if-env-changed=MKERNEL_DEVICE_FEATURES");
    println!("cargo:rerun-if-env-changed=CUDA_LIBRARY_PATH");
    for var in ["MKERNEL_PTXAS", "MKERNEL_NVTOOLS", "CUDA_HOME"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    link_stub_rpath();
    embed_commit(&root);

    let toolchain = env::var("MKERNEL_DEVICE_TOOLCHAIN").unwrap_or_else(|_| pinned_toolchain(&root));
    let sysroot = sysroot(&toolchain);
    let llvm_bin = sysroot.join("lib/rustlib").join(host_triple()).join("bin");
    for tool in ["llvm-link", "opt", "llc"] {
        if !llvm_bin.join(tool).exists() {
            fail(&format!(
                "`{tool}` missing from {}: the `llvm-tools` component of {toolchain} is not installed; {INSTALL_HINT}",
                llvm_bin.display()
            ));
        }
    }
    if !sysroot.join("lib/rustlib/src/rust/library/core").exists() {
        fail(&format!(
            "the `rust-src` component of {toolchain} is not installed (needed by -Zbuild-std=core); {INSTALL_HINT}"
        ));
    }

    let linker = root.join("device/ptx-link.sh");
    let link_hash = {
        let mut h = DefaultHasher::new();
        fs::read(&linker).unwrap_or_else(|e| fail(&format!("reading {}: {e}", linker.display()))).hash(&mut h);
        h.finish()
    };
    let rustflags = [
        format!("-Ctarget-cpu={CPU}"),
        format!("-Clinker={}", linker.display()),
        format!("--cfg=mkernel_link=\"{link_hash:016x}\""),
    ];

    // target/<profile>/build/mkernel-*/out -> target/ptx-build (shared by debug and release).
    let target_dir =
        out_dir.ancestors().nth(4).map(|p| p.join("ptx-build")).unwrap_or_else(|| out_dir.join("ptx-build"));
    let mut cmd = Command::new("cargo");
    for (k, _) in env::vars() {
        let drop = k.starts_with("CARGO_") && k != "CARGO_HOME"
            || k.starts_with("RUSTC")
            || k.starts_with("RUSTDOC")
            || matches!(
                k.as_str(),
                "RUSTFLAGS"
                    | "RUSTUP_TOOLCHAIN"
                    | "TARGET"
                    | "HOST"
                    | "OUT_DIR"
                    | "PROFILE"
                    | "OPT_LEVEL"
                    | "DEBUG"
                    | "NUM_JOBS"
            );
        if drop {
            cmd.env_remove(&k);
        }
    }
    cmd.env("RUSTUP_TOOLCHAIN", &toolchain)
        .env("CARGO_ENCODED_RUSTFLAGS", rustflags.join("\x1f"))
        .env("MKERNEL_LLVM_BIN", &llvm_bin)
        .args([
            "rustc",
            "--lib",
            "--crate-type",
            "cdylib",
            "--profile",
            "ptx",
            "--target",
            TARGET,
            "-Zbuild-std=core",
            "--message-format=short",
        ])
        .arg("--manifest-path")
        .arg(root.join("device/Cargo.toml"))
        // Diagnostic modules only (`trace`: launch timelines); the product builds none.
        .args(env::var("MKERNEL_DEVICE_FEATURES").ok().filter(|f| !f.is_empty()).map(|f| format!("--features={f}")))
        .arg("--target-dir")
        .arg(&target_dir);
    let status = cmd
        .status()
        .unwrap_or_else(|e| fail(&format!("could not run cargo for the device crate: {e}; {INSTALL_HINT}")));
    if !status.success() {
        fail("the device crate failed to build for nvptx64-nvidia-cuda (errors above)");
    }
    let built = target_dir.join(TARGET).join("ptx/mkernel_device.ptx");
    let ptx = fs::read_to_string(&built).unwrap_or_else(|e| fail(&format!("reading {}: {e}", built.display())));
    let ptx = apply_launch_bounds(&ptx).unwrap_or_else(|e| fail(&e));
    if !ptx.contains(&format!(".target {CPU}")) {
        fail(&format!("the device module does not target {CPU}"));
    }
    fs::write(out_dir.join("mkernel.ptx"), &ptx).unwrap();
    assemble(&root, &out_dir, &ptx);
}

/// `OUT_DIR/mkernel.cubin`: the module assembled by `ptxas -arch=sm_90a`, or empty when there is
/// no `ptxas` (`MKERNEL_PTXAS=off` asks for none) or it fails (a warning says why; the host then
/// JIT-compiles the PTX). `OUT_DIR/mkernel.ptxas` names the assembler (its `--version` line),
/// which the host reports.
fn assemble(root: &Path, out_dir: &Path, ptx: &str) {
    let (cubin, about) = (out_dir.join("mkernel.cubin"), out_dir.join("mkernel.ptxas"));
    let ptxas = match env::var("MKERNEL_PTXAS") {
        Ok(v) if v == "off" => None,
        Ok(v) => Some(PathBuf::from(v)),
        Err(_) => nvtool(root, "ptxas"),
    };
    let version = ptxas.as_ref().and_then(|p| {
        let out = Command::new(p).arg("--version").output().ok().filter(|o| o.status.success())?;
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        text.lines().rev().find(|l| !l.trim().is_empty()).map(|l| l.trim().to_string())
    });
    match ptxas.zip(version) {
        Some((ptxas, version)) if run_ptxas(&ptxas, &version, ptx, out_dir, &cubin) => {
            fs::write(&about, format!("ptxas {version}")).unwrap()
        }
        _ => {
            // The stamp names the last success: an emptied cubin must not pass for it.
            let _ = fs::remove_file(out_dir.join(STAMP));
            fs::write(&cubin, b"").unwrap();
            fs::write(&about, "").unwrap();
        }
    }
}

/// Where the hash of the last successfully assembled PTX and its assembler is kept.
const STAMP: &str = "mkernel.cubin.stamp";

/// Assemble `OUT_DIR/mkernel.ptx` (whose text is `ptx`) into `cubin` with `ptxas`; whether
/// `cubin` now holds it. Skipped when the PTX and the assembler are those of the last success
/// ([`STAMP`], which [`assemble`] removes whenever it empties the cubin).
fn run_ptxas(ptxas: &Path, version: &str, ptx: &str, out_dir: &Path, cubin: &Path) -> bool {
    let stamp = {
        let mut h = DefaultHasher::new();
        (ptx, version, ptxas.display().to_string()).hash(&mut h);
        format!("{:016x}", h.finish())
    };
    let stamp_file = out_dir.join(STAMP);
    if fs::read_to_string(&stamp_file).is_ok_and(|s| s == stamp) && fs::metadata(cubin).is_ok_and(|m| m.len() > 0) {
        return true;
    }
    let out = Command::new(ptxas).args(["-arch", CPU, "-o"]).arg(cubin).arg(out_dir.join("mkernel.ptx")).output();
    match out {
        Ok(o) if o.status.success() => {
            fs::write(&stamp_file, stamp).unwrap();
            true
        }
        failed => {
            let why = match failed {
                Ok(o) => String::from_utf8_lossy(&o.stderr).lines().take(3).collect::<Vec<_>>().join("; "),
                Err(e) => e.to_string(),
            };
            println!(
                "cargo:warning=ptxas ({}) could not assemble the module, the host will JIT it: {why}",
                ptxas.display()
            );
            false
        }
    }
}

// `nvtool`: where NVIDIA's tools are looked for, shared with tests/ptx.rs.
include!("nvtools.rs");

/// Where scripts/setup.sh built the libcuda stub (no driver on this machine), let our binaries
/// find it at run time through an rpath. On a machine with a driver there is no stub and no
/// rpath; binaries copied to a GPU machine find the real libcuda (the rpath does not exist there).
fn link_stub_rpath() {
    let Ok(dir) = env::var("CUDA_LIBRARY_PATH") else { return };
    let lib = Path::new(&dir).join("lib64");
    let marker = lib.join(".stub");
    println!("cargo:rerun-if-changed={}", marker.display());
    if marker.exists() {
        println!("cargo:rustc-link-arg=-Wl,-rpath,{}", lib.display());
    }
}

/// `MKERNEL_COMMIT` for benchmark records: `git describe --always --dirty` of the source tree, or
/// `unknown` outside a git checkout (a crates.io build).
fn embed_commit(root: &Path) {
    for p in [".git/HEAD", ".git/index"] {
        if root.join(p).exists() {
            println!("cargo:rerun-if-changed={}", root.join(p).display());
        }
    }
    let commit = Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=7"])
        .current_dir(root)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| "unknown".into());
    // A diagnostic module says so in every record it times.
    let features = env::var("MKERNEL_DEVICE_FEATURES").ok().filter(|f| !f.is_empty());
    let commit = match features {
        Some(f) => format!("{commit}+{}", f.replace(',', "+")),
        None => commit,
    };
    println!("cargo:rustc-env=MKERNEL_COMMIT={commit}");
}

fn fail(msg: &str) -> ! {
    eprintln!("mkernel build: {msg}");
    panic!("mkernel build: {msg}");
}

fn host_triple() -> String {
    env::var("HOST").unwrap()
}

fn pinned_toolchain(root: &Path) -> String {
    let text = fs::read_to_string(root.join("rust-toolchain.toml")).unwrap_or_default();
    text.lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("channel")
                .map(|v| v.trim_start_matches([' ', '=']).trim().trim_matches('"').to_string())
        })
        .unwrap_or_else(|| fail("rust-toolchain.toml names no channel"))
}

fn sysroot(toolchain: &str) -> PathBuf {
    let out = Command::new("rustc")
        .env_remove("RUSTC")
        .env("RUSTUP_TOOLCHAIN", toolchain)
        .args(["--print", "sysroot"])
        .output()
        .unwrap_or_else(|e| fail(&format!("could not run rustc ({e}); {INSTALL_HINT}")));
    if !out.status.success() {
        fail(&format!(
            "toolchain {toolchain} is not usable: {}; {INSTALL_HINT}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    PathBuf::from(String::from_utf8(out.stdout).unwrap().trim())
}

/// Rewrite each `// @mkernel.launch_bounds maxntid=N minnctapersm=M` marker (emitted by the
/// `launch_bounds!` macro inside a kernel) into `.maxntid N, 1, 1` / `.minnctapersm M` on its
/// `.entry`. A kernel that uses `setmaxnreg` without bounds is an error: ptxas would ignore it.
fn apply_launch_bounds(ptx: &str) -> Result<String, String> {
    let lines: Vec<&str> = ptx.lines().collect();
    let mut entries: Vec<(String, usize, usize)> = Vec::new(); // (name, first line, line of "{")
    for (i, l) in lines.iter().enumerate() {
        if let Some(rest) = l.split(".entry ").nth(1).filter(|_| l.contains(".entry ")) {
            let name = rest.split('(').next().unwrap_or("").trim().to_string();
            let brace = (i..lines.len()).find(|&j| lines[j].trim() == "{").ok_or(format!("no body for {name}"))?;
            entries.push((name, i, brace));
        }
    }
    let mut inserts: Vec<(usize, String)> = Vec::new();
    for (k, (name, start, brace)) in entries.iter().enumerate() {
        let end = entries.get(k + 1).map(|e| e.1).unwrap_or(lines.len());
        let body = &lines[*start..end];
        let marker = body
            .iter()
            .find_map(|l| l.split("@mkernel.launch_bounds").nth(1).filter(|_| l.contains("@mkernel.launch_bounds")));
        let uses_setmaxnreg = body.iter().any(|l| l.contains("setmaxnreg"));
        match marker {
            Some(m) => {
                let field = |key: &str| {
                    m.split_whitespace()
                        .find_map(|kv| kv.strip_prefix(key))
                        .and_then(|v| v.parse::<u32>().ok())
                        .ok_or(format!("{name}: bad launch_bounds marker `{m}`"))
                };
                let (maxntid, minctas) = (field("maxntid=")?, field("minnctapersm=")?);
                inserts.push((*brace, format!(".maxntid {maxntid}, 1, 1\n.minnctapersm {minctas}")));
            }
            None if uses_setmaxnreg => {
                return Err(format!("kernel {name} uses setmaxnreg but declares no launch_bounds!"))
            }
            None => {}
        }
    }
    let mut out = String::with_capacity(ptx.len() + 256);
    for (i, l) in lines.iter().enumerate() {
        if let Some((_, d)) = inserts.iter().find(|(at, _)| *at == i) {
            out.push_str(d);
            out.push('\n');
        }
        out.push_str(l);
        out.push('\n');
    }
    Ok(out)
}
