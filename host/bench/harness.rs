//! The one timing harness every benchmark uses (the peers' method): warm-up launches, then for
//! each timed iteration a barrier across ranks, a CUDA-event pair around the work, and the median
//! per rank; a multi-rank figure is the slowest rank's median. Results are [`Record`]s with one
//! JSON-lines schema for every op, printed as a table by [`print_table`].
use crate::comm::bootstrap::Bootstrap;
use crate::gpu::{GpuError, StreamBound};
use crate::{Gpu, Result};
use serde::{Deserialize, Serialize};
use std::io::IsTerminal;

/// The source tree the binary was built from (`git describe --always --dirty`).
pub const COMMIT: &str = env!("MKERNEL_COMMIT");

/// One measured (op, shape, world, layout, implementation): the schema of every JSON line that
/// `mkernel bench` writes and `mkernel plot` reads.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Operation: `gemm`, `all_gather`, `ag_gemm`, `fifo`, ...
    pub op: String,
    /// Problem size: `MxNxK` for GEMMs, bytes for collectives.
    pub shape: String,
    /// Ranks taking part.
    pub world: u32,
    /// (Emulated) nodes those ranks form.
    pub nodes: u32,
    /// Operand layout (`nk`, `kn`) or `-`.
    pub layout: String,
    /// Implementation: `mkernel`, `mkernel-fused`, `mkernel-unfused`, `cublas`, `copy-engine`, ...
    #[serde(rename = "impl")]
    pub imp: String,
    /// Median milliseconds (multi-rank: the slowest rank's median).
    pub ms: f64,
    /// Useful tensor-core work per GPU over `ms`, where the op has any.
    pub tflops: Option<f64>,
    /// Bytes moved per GPU over `ms`, where that is the op's measure.
    pub gbps: Option<f64>,
    /// Source tree of the binary.
    pub commit: String,
    /// GPU name (rank 0's).
    pub gpu: String,
    /// UTC date of the run.
    pub date: String,
    /// Op-specific fields (role split, chunk size, chosen path, ...).
    #[serde(flatten)]
    pub extra: serde_json::Map<String, serde_json::Value>,
}

/// What every record of one run shares.
#[derive(Clone, Debug)]
pub struct RunInfo {
    /// GPU name.
    pub gpu: String,
    /// Ranks.
    pub world: u32,
    /// Nodes.
    pub nodes: u32,
}

impl RunInfo {
    /// A single-GPU run on `gpu`.
    pub fn single(gpu: &Gpu) -> Self {
        Self { gpu: gpu.info().name.clone(), world: 1, nodes: 1 }
    }

    /// A record with this run's fields filled in.
    pub fn record(&self, op: &str, shape: impl Into<String>, layout: &str, imp: &str, ms: f64) -> Record {
        Record {
            op: op.into(),
            shape: shape.into(),
            world: self.world,
            nodes: self.nodes,
            layout: layout.into(),
            imp: imp.into(),
            ms,
            tflops: None,
            gbps: None,
            commit: COMMIT.into(),
            gpu: self.gpu.clone(),
            date: chrono::Utc::now().format("%Y-%m-%d").to_string(),
            extra: Default::default(),
        }
    }
}

impl Record {
    /// Set TFLOP/s from the op's floating-point operations per GPU.
    pub fn with_flops(mut self, flops: f64) -> Self {
        self.tflops = Some(flops / self.ms / 1e9);
        self
    }

    /// Set GB/s from the bytes moved per GPU.
    pub fn with_bytes(mut self, bytes: f64) -> Self {
        self.gbps = Some(bytes / self.ms / 1e6);
        self
    }

    /// Add an op-specific field.
    pub fn with(mut self, key: &str, value: impl Into<serde_json::Value>) -> Self {
        self.extra.insert(key.into(), value.into());
        self
    }

    /// Tag the record `device_barrier: true` when the timing lined the GPUs up (JSON only).
    pub fn timed_with(self, t: Timing) -> Self {
        if t.device_barrier {
            self.with("device_barrier", true)
        } else {
            self
        }
    }

    /// The record as one JSON line (no newline).
    pub fn json(&self) -> String {
        serde_json::to_string(self).expect("a record always serialises")
    }
}

/// How many launches to run before and while timing.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Untimed launches first (module load, clocks, caches).
    pub warmup: usize,
    /// Timed iterations (at least 1).
    pub reps: usize,
    /// Line the GPUs up after each barrier ([`super::RankGroup`]; where a command builds one).
    pub device_barrier: bool,
}

impl Default for Timing {
    fn default() -> Self {
        Self { warmup: 5, reps: 20, device_barrier: false }
    }
}

/// Where the ranks of a benchmark meet: nothing for one process, the bootstrap for several.
pub trait Group {
    /// All ranks arrive before any leaves.
    fn barrier(&mut self) -> Result<()>;
    /// The largest of every rank's `v`.
    fn max(&mut self, v: f64) -> Result<f64>;
}

/// A single process.
pub struct Solo;

impl Group for Solo {
    fn barrier(&mut self) -> Result<()> {
        Ok(())
    }
    fn max(&mut self, v: f64) -> Result<f64> {
        Ok(v)
    }
}

impl Group for Bootstrap {
    fn barrier(&mut self) -> Result<()> {
        Ok(Bootstrap::barrier(self)?)
    }
    fn max(&mut self, v: f64) -> Result<f64> {
        let all = self.all_gather(&v.to_le_bytes())?;
        Ok(all.iter().map(|b| f64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]))).fold(v, f64::max))
    }
}

/// Median of samples (the upper one of the middle pair); NaN for none.
pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// Time `work` (which enqueues on `gpu`'s stream); see [`time_each`].
pub fn time_ms<G: Group + ?Sized>(
    gpu: &Gpu,
    group: &mut G,
    t: Timing,
    mut work: impl FnMut() -> Result<()>,
) -> Result<f64> {
    Ok(time_each(gpu, group, t, &mut [&mut work])?[0])
}

/// Time several pieces of work interleaved (so drift in clocks and temperature hits them alike):
/// `t.warmup` untimed runs of each, then `t.reps` rounds in which each piece runs once after the
/// stream drained and all ranks met at a barrier, bracketed by CUDA events. Returns, per piece,
/// the slowest rank's median in ms.
pub fn time_each<G: Group + ?Sized>(
    gpu: &Gpu,
    group: &mut G,
    t: Timing,
    works: &mut [&mut dyn FnMut() -> Result<()>],
) -> Result<Vec<f64>> {
    for work in works.iter_mut() {
        for _ in 0..t.warmup {
            work()?;
        }
    }
    gpu.synchronize_bounded(StreamBound::UNKNOWN, || false)?;
    let mut samples = vec![Vec::with_capacity(t.reps); works.len()];
    for _ in 0..t.reps.max(1) {
        for (work, out) in works.iter_mut().zip(samples.iter_mut()) {
            gpu.synchronize_bounded(StreamBound::UNKNOWN, || false)?;
            group.barrier()?;
            let mut failed = None;
            let ms = gpu.time_ms(|| {
                work().map_err(|e| {
                    let msg = e.to_string();
                    failed = Some(e);
                    GpuError::Module(msg)
                })
            });
            if let Some(e) = failed {
                return Err(e);
            }
            out.push(ms? as f64);
        }
    }
    samples.into_iter().map(|s| group.max(median(s))).collect()
}

/// A progress bar on stderr for sweeps, drawn only when stderr is a terminal (logs stay clean).
pub fn progress(len: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(len);
    if let Ok(style) = indicatif::ProgressStyle::with_template("{msg} [{bar:30}] {pos}/{len} {elapsed}") {
        bar.set_style(style);
    }
    bar.set_message(what.to_string());
    bar
}

/// Print records as a table grouped by (op, shape, world, layout); `vs` names the implementation
/// each group's ratio column compares against (its time over the row's: above 1, the row is
/// faster).
pub fn print_table(records: &[Record], vs: Option<&str>) {
    let head = vs.map(|v| format!("vs {v}")).unwrap_or_default();
    println!(
        "{:<11} {:<18} {:>5} {:>4} {:<17} {:>10} {:>9} {:>9} {:>9}",
        "op", "shape", "world", "B", "impl", "ms", "TFLOP/s", "GB/s", head
    );
    for r in records {
        let base = vs.and_then(|v| {
            records.iter().find(|o| {
                o.imp == v && o.op == r.op && o.shape == r.shape && o.world == r.world && o.layout == r.layout
            })
        });
        let f = |v: Option<f64>, p: usize| v.map(|x| format!("{x:.p$}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<11} {:<18} {:>5} {:>4} {:<17} {:>10.4} {:>9} {:>9} {:>9}",
            r.op,
            r.shape,
            if r.nodes > 1 { format!("{}x{}", r.nodes, r.world / r.nodes.max(1)) } else { r.world.to_string() },
            r.layout,
            r.imp,
            r.ms,
            f(r.tflops, 1),
            f(r.gbps, 1),
            f(base.map(|b| b.ms / r.ms), 3)
        );
    }
}

/// Write records as JSON lines to `path` (replacing it).
pub fn write_json(path: &std::path::Path, records: &[Record]) -> std::io::Result<()> {
    let text: String = records.iter().map(|r| r.json() + "\n").collect();
    std::fs::write(path, text)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(imp: &str, ms: f64) -> Record {
        let run = RunInfo { gpu: "GPU".into(), world: 2, nodes: 1 };
        run.record("ag_gemm", "16384x4096x8192", "kn", imp, ms)
    }

    #[test]
    fn record_schema_round_trips_with_extra_fields() {
        let r = rec("mkernel-fused", 2.0).with_flops(2e12).with_bytes(1e9).with("comm_ctas", 4);
        let line = r.json();
        for key in
            ["\"op\":", "\"shape\":", "\"world\":2", "\"impl\":\"mkernel-fused\"", "\"commit\":", "\"comm_ctas\":4"]
        {
            assert!(line.contains(key), "{key} missing from {line}");
        }
        assert_eq!(r.tflops, Some(1000.0));
        assert_eq!(r.gbps, Some(500.0));
        let back: Record = serde_json::from_str(&line).unwrap();
        assert_eq!(back, r);
    }

    #[test]
    fn median_and_max_over_ranks() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 3.0, 2.0]), 3.0);
        assert!(median(vec![]).is_nan());
        assert_eq!(Solo.max(1.5).unwrap(), 1.5);
    }
}
