//! One module per op. Each validates its arguments (typed errors naming the argument and the
//! rule, before anything launches), plans the launch (tensor maps, role split), takes its
//! workspace (the communicator's symmetric heap for anything peers write), launches, and keeps
//! an unfused reference path where it fuses communication.
pub mod ag_gemm;
pub mod allgather;
pub mod gemm;
pub mod gemm_rs;
pub mod tuned;

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
