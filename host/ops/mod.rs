//! One module per op. Each validates its arguments (typed errors naming the argument and the
//! rule, before anything launches), plans the launch (tensor maps, role split), takes its
//! workspace (the communicator's symmetric heap for anything peers write), launches, and keeps
//! an unfused reference path where it fuses communication.
pub mod ag_gemm;
pub mod allgather;
pub mod attention;
mod copy_engines;
pub mod gemm;
pub mod gemm_rs;
pub mod moe;
pub mod ring_attention;
pub mod tuned;

use crate::Gpu;

/// What every bound op with a fused and an unfused path offers, so that checks and benches can
/// drive any of them the same way. Each op's inherent methods of the same names do the work.
pub trait TwoPathOp {
    /// Enqueue one call through `path` on `gpu`'s stream (asynchronous).
    fn launch_path(&self, gpu: &Gpu, path: Path) -> crate::Result<()>;
    /// Wait for this rank's launches; report a device-side timeout or a proxy error.
    fn wait(&self, gpu: &Gpu) -> crate::Result<()>;
}

/// Which implementation a launch runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Path {
    /// One persistent launch.
    Fused,
    /// The separate kernels (e.g. our all-gather, then our GEMM).
    Unfused,
}

impl Path {
    /// `fused` / `unfused`.
    pub fn name(self) -> &'static str {
        match self {
            Path::Fused => "fused",
            Path::Unfused => "unfused",
        }
    }
}

/// A typed error naming `arg` unless its device address `addr` is 16-byte aligned, which `why`
/// needs (TMA and bulk copies move 16-byte units from 16-byte aligned bases).
pub(crate) fn check_aligned16(arg: &'static str, addr: u64, why: &str) -> crate::Result<()> {
    if !addr.is_multiple_of(16) {
        return Err(crate::error::invalid(arg, format!("address {addr:#x} must be 16-byte aligned ({why})")));
    }
    Ok(())
}

/// An on/off choice of the fused form that only some ops and layouts have: the asked value
/// (`Some(true)` where it is not `possible` is a typed error naming the option and its `rule`),
/// else `default` where possible.
pub(crate) fn form_switch(
    (name, asked, rule): (&'static str, Option<bool>, &str),
    possible: bool,
    default: bool,
) -> crate::Result<bool> {
    match asked {
        Some(true) if !possible => Err(crate::error::invalid(name, rule)),
        Some(v) => Ok(v),
        None => Ok(possible && default),
    }
}

/// How the path is chosen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PathChoice {
    /// The tuned table's choice for the nearest shape measured on this world size, else the
    /// op's rule of thumb (see [`tuned`]).
    Auto,
    /// Always fused.
    Fused,
    /// Always unfused.
    Unfused,
}
