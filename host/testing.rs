//! Helpers for GPU tests and benches: a device or a loud skip, deterministic random data, and
//! error metrics. Public so integration tests, benches and downstream crates share them.
use crate::gpu::{self, Gpu};
use half::bf16;

/// Environment variable that turns a "no GPU" skip into a failure.
pub const REQUIRE_GPU_ENV: &str = "MKERNEL_REQUIRE_GPU";

/// True when `MKERNEL_REQUIRE_GPU=1`.
pub fn gpu_required() -> bool {
    std::env::var(REQUIRE_GPU_ENV).map(|v| v == "1").unwrap_or(false)
}

/// Open GPU `ordinal` (0 unless `MKERNEL_DEVICE` says otherwise) for test `name`, or print
/// `skipped: no CUDA device` and return `None`. With `MKERNEL_REQUIRE_GPU=1` a skip panics.
pub fn gpu_or_skip(name: &str) -> Option<Gpu> {
    let ordinal = std::env::var("MKERNEL_DEVICE").ok().and_then(|v| v.parse().ok()).unwrap_or(0);
    let reason = match gpu::device_count() {
        Ok(0) => "no NVIDIA driver or GPU on this machine".to_string(),
        Ok(_) => match Gpu::new(ordinal) {
            Ok(g) => {
                let cc = g.info().compute_capability;
                if cc == (9, 0) {
                    return Some(g);
                }
                format!("device {ordinal} is sm_{}{}, mkernel needs sm_90 (Hopper)", cc.0, cc.1)
            }
            Err(e) if e.is_no_device() => e.to_string(),
            Err(e) => panic!("{name}: opening GPU {ordinal} failed: {e}"),
        },
        Err(e) => e.to_string(),
    };
    if gpu_required() {
        panic!("{name}: {REQUIRE_GPU_ENV}=1 but {reason}");
    }
    // Straight to the process's stderr: the test harness captures `println!` of passing tests,
    // and a skip must be seen.
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({name}: {reason})");
    None
}

/// Like [`gpu_or_skip`] for a test that needs `need` GPUs: false (after a loud skip) where fewer
/// are present, unless `MKERNEL_REQUIRE_GPUS` asks for at least `need`, which makes it a failure.
pub fn gpus_or_skip(name: &str, need: u32) -> bool {
    if gpu_or_skip(name).is_none() {
        return false;
    }
    // A driver error here (one GPU just opened) is a fault, not "fewer GPUs": never a quiet skip.
    let have = gpu::device_count().unwrap_or_else(|e| panic!("{name}: counting the GPUs failed: {e}"));
    let required = std::env::var("MKERNEL_REQUIRE_GPUS").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(0);
    if have < need {
        assert!(required < need, "{name}: MKERNEL_REQUIRE_GPUS={required} but only {have} GPU(s)");
        use std::io::Write;
        let _ = writeln!(std::io::stderr(), "skipped: no CUDA device ({name}: needs {need} GPUs, {have} present)");
    }
    have >= need
}

/// Run `mkernel ARGS` as `nprocs` ranks on `gpus` forming `nodes` nodes (the multi-process tests'
/// way to run a per-rank check); panics with the launcher's error, which names the failed rank.
pub fn run_ranks(built_bin: &str, nprocs: u32, nodes: u32, gpus: &[u32], args: &[&str], timeout_s: u64) {
    let spec = crate::comm::launch::LaunchSpec {
        nprocs,
        nodes,
        gpus: Some(gpus.to_vec()),
        program: mkernel_bin(built_bin).into(),
        args: args.iter().map(Into::into).collect(),
        env: vec![],
        timeout: std::time::Duration::from_secs(timeout_s),
    };
    if let Err(e) = crate::comm::launch::launch(&spec) {
        panic!("{nprocs} ranks / {nodes} nodes on GPUs {gpus:?}, `mkernel {}`: {e}", args.join(" "));
    }
}

/// `mkernel rank-check OP EXTRA...` as `nprocs` ranks forming `nodes` nodes on `gpus`, bounded
/// by 300 s (see [`run_ranks`]).
pub fn rank_check(built_bin: &str, op: &str, (nprocs, nodes): (u32, u32), gpus: &[u32], extra: &[&str]) {
    let mut args = vec!["rank-check", op];
    args.extend(extra);
    run_ranks(built_bin, nprocs, nodes, gpus, &args, 300);
}

/// A small deterministic generator (splitmix64): fresh data per seed, same data per seed.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    /// Seeded generator.
    pub fn new(seed: u64) -> Self {
        Self(seed)
    }

    /// A generator seeded from the clock (fresh data every run); the seed is printed so a failure
    /// can be replayed with `MKERNEL_SEED`.
    pub fn fresh(name: &str) -> Self {
        let seed = std::env::var("MKERNEL_SEED").ok().and_then(|v| v.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos() as u64).unwrap_or(1)
        });
        println!("{name}: seed {seed} (replay with MKERNEL_SEED={seed})");
        Self(seed)
    }

    /// Next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Next 32 random bits.
    pub fn next_u32(&mut self) -> u32 {
        (self.next_u64() >> 32) as u32
    }

    /// Uniform in [-1, 1).
    pub fn uniform(&mut self) -> f32 {
        ((self.next_u64() >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
    }

    /// `n` uniform values in [-1, 1) as bf16.
    pub fn bf16_vec(&mut self, n: usize) -> Vec<bf16> {
        (0..n).map(|_| bf16::from_f32(self.uniform())).collect()
    }

    /// `n` uniform f32 values in [-1, 1).
    pub fn f32_vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.uniform()).collect()
    }
}

/// Byte written over outputs before a run: bf16 0xFFFF and f32 0xFFFFFFFF are NaN, so an
/// element the kernel never wrote fails any comparison.
pub const POISON_BYTE: u8 = 0xff;

/// `||out - ref|| / ||ref||` (Frobenius); NaN anywhere in `out` gives infinity.
pub fn rel_err(out: &[f64], reference: &[f64]) -> f64 {
    assert_eq!(out.len(), reference.len());
    let (mut num, mut den) = (0.0, 0.0);
    for (o, r) in out.iter().zip(reference) {
        if !o.is_finite() {
            return f64::INFINITY;
        }
        num += (o - r) * (o - r);
        den += r * r;
    }
    if den == 0.0 {
        num.sqrt()
    } else {
        (num / den).sqrt()
    }
}

/// Largest `|out - ref| / (atol + |ref|)`: catches single wrong elements that a norm hides.
pub fn max_scaled_err(out: &[f64], reference: &[f64], atol: f64) -> f64 {
    out.iter()
        .zip(reference)
        .map(|(o, r)| if o.is_finite() { (o - r).abs() / (atol + r.abs()) } else { f64::INFINITY })
        .fold(0.0, f64::max)
}

/// The `mkernel` binary for multi-process tests: `MKERNEL_BIN`, else the build's own, else the
/// one next to the running test binary (GPU machines get both copied into one folder).
pub fn mkernel_bin(built: &str) -> std::path::PathBuf {
    if let Ok(p) = std::env::var("MKERNEL_BIN") {
        return p.into();
    }
    let built = std::path::PathBuf::from(built);
    if built.is_file() {
        return built;
    }
    let exe = std::env::current_exe().expect("current_exe");
    exe.parent().expect("test binary folder").join("mkernel")
}
