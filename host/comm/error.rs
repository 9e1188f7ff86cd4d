//! The communication layer's error type.
use crate::gpu::GpuError;

/// An error from the world, bootstrap, launcher, FIFO, proxy or a transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// A process-group variable is missing or breaks a rule.
    #[error("environment variable {var}: {rule}")]
    Env { var: &'static str, rule: String },
    /// Some ranks did not take part in a bootstrap step in time.
    #[error("bootstrap {op} timed out after {waited_ms} ms on rank {rank}: rank(s) {missing:?} did not arrive")]
    Missing { op: String, rank: u32, missing: Vec<u32>, waited_ms: u64 },
    /// The bootstrap failed for another reason (named).
    #[error("bootstrap on rank {rank}: {what}")]
    Bootstrap { rank: u32, what: String },
    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: std::io::Error,
    },
    /// A launched rank failed.
    #[error("rank {rank} failed ({status}); the other ranks were stopped")]
    RankFailed { rank: u32, status: String },
    /// A GPU cannot reach another over peer-to-peer.
    #[error("GPU {from} cannot access GPU {to} peer-to-peer (NVLink/PCIe P2P unavailable)")]
    NoPeerAccess { from: u32, to: u32 },
    /// A transport failed (the message names the operation).
    #[error("transport {transport}: {what}")]
    Transport { transport: &'static str, what: String },
    /// An invalid argument; nothing was started.
    #[error("invalid argument `{arg}`: {rule}")]
    InvalidArgument { arg: &'static str, rule: String },
    /// The GPU runtime failed.
    #[error(transparent)]
    Gpu(#[from] GpuError),
}

/// Result of the communication layer.
pub type CommResult<T> = std::result::Result<T, CommError>;

pub(crate) fn io(context: impl Into<String>) -> impl FnOnce(std::io::Error) -> CommError {
    let context = context.into();
    move |source| CommError::Io { context, source }
}
