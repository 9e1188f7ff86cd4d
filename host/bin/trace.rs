//! `--trace` of `bench ag-gemm`, `bench gemm-rs|gemm-ar` and `bench moe`: launch timelines from a diagnostic module
//! (`mkernel::bench::timeline`).
use anyhow::{ensure, Context};
use mkernel::bench::timeline::{self, Timeline};
use mkernel::Gpu;
use std::path::PathBuf;

/// Launch timelines of a bench.
#[derive(clap::Args, Debug, Clone)]
pub struct TraceArgs {
    /// Stamp the fused kernel's launches (a module built with MKERNEL_DEVICE_FEATURES=trace; one
    /// problem and one layout): a summary per rank, and the stamps as JSON lines in
    /// FILE.rankN.jsonl.
    #[arg(long)]
    pub trace: Option<PathBuf>,
    /// The traced launches, FIRST[,COUNT]: the first epoch (from 1) and how many. Each launch of
    /// the op's kernel that moves data counts one, warm-ups first, then the timed iterations,
    /// one of each variant in turn (AllGather + GEMM: fused, then the communication alone, so
    /// with the default 5 warm-ups the fused launch of timed iteration r is 2r + 11; GEMM +
    /// ReduceScatter / AllReduce: the fused launches only, timed iteration r's being r + 6; the
    /// MoE: fused, the unfused path's dispatch, the dispatch alone). The summary says which
    /// traced launch ran tiles.
    #[arg(long = "trace-epochs", value_parser = crate::args::epochs, default_value = "41,2")]
    pub trace_epochs: (u32, u32),
}

impl TraceArgs {
    /// With `--trace`, `problems` (shapes or configs, times layouts) must be one: each op counts
    /// its launches' epochs from 1. `what` names them.
    pub fn check_one(&self, problems: usize, what: &str) -> anyhow::Result<()> {
        if self.trace.is_some() {
            ensure!(problems == 1, "--trace: one {what} (each op counts its launches' epochs from 1)");
        }
        Ok(())
    }

    /// With `--trace`, the module's timeline with the chosen launches selected (call before them).
    pub fn select<'g>(&self, gpu: &'g Gpu) -> anyhow::Result<Option<Timeline<'g>>> {
        self.select_epochs(gpu, self.trace_epochs)
    }

    /// With `--trace`, the module's timeline with the plain GEMM's launches selected (it stamps
    /// every launch under `PLAIN_EPOCH`): call right before the one launch to trace, with no
    /// other traced kernel in between.
    pub fn select_plain<'g>(&self, gpu: &'g Gpu) -> anyhow::Result<Option<Timeline<'g>>> {
        self.select_epochs(gpu, (mkernel::abi::trace::PLAIN_EPOCH, 1))
    }

    /// With `--trace`, the module's timeline with epochs `first..first + count` selected.
    fn select_epochs<'g>(&self, gpu: &'g Gpu, (first, count): (u32, u32)) -> anyhow::Result<Option<Timeline<'g>>> {
        let Some(_) = &self.trace else { return Ok(None) };
        let t = Timeline::of(gpu)?;
        t.select(first, count)?;
        Ok(Some(t))
    }

    /// Write the stamps of `t` as JSON lines into `FILE{tag}.rankN.jsonl` and print their
    /// summary (`roles`: the kernel's role names by value; `tag`: "" for the fused kernel's).
    pub fn report(&self, t: Option<&Timeline<'_>>, rank: u32, roles: &[&str], tag: &str) -> anyhow::Result<()> {
        let (Some(t), Some(file)) = (t, &self.trace) else { return Ok(()) };
        let (stamps, taken) = t.read()?;
        let path = PathBuf::from(format!("{}{tag}.rank{rank}.jsonl", file.display()));
        let mut out = String::new();
        for s in &stamps {
            out.push_str(&serde_json::to_string(s)?);
            out.push('\n');
        }
        std::fs::write(&path, out).with_context(|| format!("--trace: writing {}", path.display()))?;
        let lost = if taken as usize > stamps.len() {
            format!(", {} more not kept (the buffer is full)", taken as usize - stamps.len())
        } else {
            String::new()
        };
        println!(
            "timeline of rank {rank} ({} stamps{lost}, in {}):\n{}",
            stamps.len(),
            path.display(),
            timeline::summary(&stamps, roles)
        );
        Ok(())
    }
}
