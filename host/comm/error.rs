//! The communication layer's error type.
use crate::gpu::GpuError;

/// An error from the world, bootstrap, launcher, FIFO, proxy or a transport.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CommError {
    /// A process-group variable is missing or breaks a rule.
    #[error("environment variable {var}: {rule}")]
    Env {
        /// The variable's name.
        var: &'static str,
        /// What was wrong with it.
        rule: String,
    },
    /// Some ranks did not take part in a bootstrap step in time.
    #[error(
        "bootstrap {op} timed out after {waited_ms} ms on rank {rank}: rank(s) {} did not arrive",
        super::launch::rank_list(.missing)
    )]
    Missing {
        /// The step that timed out (`join`, `all_gather #<seq>`, ...).
        op: String,
        /// The rank that gave up waiting.
        rank: u32,
        /// The ranks it was still waiting for.
        missing: Vec<u32>,
        /// How long it waited, in milliseconds.
        waited_ms: u64,
    },
    /// The bootstrap failed for another reason (named).
    #[error("bootstrap on rank {rank}: {what}")]
    Bootstrap {
        /// The rank that saw the failure.
        rank: u32,
        /// What went wrong.
        what: String,
    },
    /// An I/O operation failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done (`rank 0: accept`, `starting rank 3: ...`).
        context: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// A launched rank failed.
    #[error("rank {rank} failed ({status}); the other ranks were stopped")]
    RankFailed {
        /// The first rank seen failing (on a timeout: the first one still running).
        rank: u32,
        /// How it ended: `exit code 1`, `killed by signal 9`, or the timeout.
        status: String,
    },
    /// The launcher got a signal (SIGINT, SIGTERM, SIGHUP) and killed every rank.
    #[error("the launcher got signal {signal}; every rank was killed ({ranks} still running)")]
    Interrupted {
        /// The signal number.
        signal: i32,
        /// Ranks that were still running.
        ranks: u32,
    },
    /// A GPU cannot reach another over peer-to-peer.
    #[error("GPU {from} cannot access GPU {to} peer-to-peer (NVLink/PCIe P2P unavailable)")]
    NoPeerAccess {
        /// CUDA ordinal of the GPU that would map the other's memory.
        from: u32,
        /// CUDA ordinal of the GPU it cannot reach.
        to: u32,
    },
    /// A transport failed (the message names the operation).
    #[error("transport {transport}: {what}")]
    Transport {
        /// Which transport (`verbs`, `sim`, `emulated-nic`, `proxy`, ...).
        transport: &'static str,
        /// The failed operation and why.
        what: String,
    },
    /// A byte range outside the region it addresses; the end is computed with checked
    /// arithmetic, so an `offset + length` that overflows is this error too (debug and release).
    #[error("transport {transport}: {region}: bytes {off}+{len} outside its {size} (offset + length must not exceed the size)")]
    OutOfBounds {
        /// Which transport (`verbs`, `sim`, ...).
        transport: &'static str,
        /// The region (`local buffer 0`, `rank 1 buffer 2`, `staging slot 3 of rank 1`).
        region: String,
        /// Offset of the range.
        off: u64,
        /// Length of the range.
        len: u64,
        /// Size of the region.
        size: u64,
    },
    /// An invalid argument; nothing was started.
    #[error("invalid argument `{arg}`: {rule}")]
    InvalidArgument {
        /// The argument's name.
        arg: &'static str,
        /// The rule it broke, with the value.
        rule: String,
    },
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
