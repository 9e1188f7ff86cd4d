//! The error type of the operations (`gemm` and the fused kernels).
use crate::abi::{WaitDiag, WAIT_FIFO_RELEASED, WAIT_FLAG, WAIT_MBAR_EMPTY, WAIT_MBAR_FULL, WAIT_MBAR_HANDOFF};
use crate::gpu::GpuError;
use std::fmt;

/// Who waited for what, decoded from the device's [`WaitDiag`].
#[derive(Clone, Debug, PartialEq)]
pub struct WaitReport(pub WaitDiag);

impl fmt::Display for WaitReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let d = &self.0;
        let role = match d.role {
            0 => "compute",
            1 => "intra-comm",
            2 => "inter-send",
            3 => "inter-reduce",
            _ => "?",
        };
        let what = match d.what {
            WAIT_FLAG => format!("flag at {:#x} to reach epoch {} (saw {})", d.flag_addr, d.expected, d.seen),
            WAIT_MBAR_FULL => {
                format!("shared-memory barrier {:#x} (data landed) to complete phase {}", d.flag_addr, d.expected)
            }
            WAIT_MBAR_EMPTY => {
                format!("shared-memory barrier {:#x} (slot released) to complete phase {}", d.flag_addr, d.expected)
            }
            WAIT_MBAR_HANDOFF => {
                format!("shared-memory barrier {:#x} (epilogue handoff) to complete phase {}", d.flag_addr, d.expected)
            }
            WAIT_FIFO_RELEASED => format!(
                "the proxy to release the FIFO through position {} (low 32 bits; released through {}): a WRITE \
                 pushed earlier was still reading its source",
                d.expected, d.seen
            ),
            w => format!("wait kind {w} on {:#x}: expected {}, saw {}", d.flag_addr, d.expected, d.seen),
        };
        let report = format!(
            "rank {} {role} CTA {} (tile {}) waited {:.3} ms for {what}",
            d.rank,
            d.cta,
            d.tile,
            d.waited_ns as f64 / 1e6
        );
        if d.status == crate::abi::DIAG_CLAIMED {
            // Its writer stopped (the context trapped) between claiming the record and publishing
            // it: the fields may be partly written.
            return write!(f, "a device wait gave up, but its report was left incomplete (partly: {report})");
        }
        f.write_str(&report)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_incomplete_report_says_so() {
        let d =
            WaitDiag { status: crate::abi::DIAG_TIMED_OUT, rank: 1, role: 2, what: WAIT_FLAG, ..Default::default() };
        let whole = WaitReport(d).to_string();
        assert!(whole.starts_with("rank 1 inter-send CTA 0") && !whole.contains("incomplete"), "{whole}");
        let partial = WaitReport(WaitDiag { status: crate::abi::DIAG_CLAIMED, ..d }).to_string();
        assert!(partial.starts_with("a device wait gave up, but its report was left incomplete"), "{partial}");
    }

    #[test]
    fn a_fifo_release_wait_says_so() {
        let d = WaitDiag {
            status: crate::abi::DIAG_TIMED_OUT,
            role: 2,
            what: WAIT_FIFO_RELEASED,
            expected: 17,
            seen: 12,
            ..Default::default()
        };
        let s = WaitReport(d).to_string();
        assert!(s.contains("release the FIFO through position 17") && s.contains("released through 12"), "{s}");
    }
}

/// An error from an mkernel operation.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An argument broke a rule; nothing was launched.
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
    /// The communication runtime failed.
    #[error(transparent)]
    Comm(#[from] crate::comm::CommError),
    /// A kernel found bad data in a device-side input (an expert id out of range, say) and left
    /// it out instead of writing anything wrong; the launch's results are not valid.
    #[error("bad device-side input to {op}: {what}")]
    DeviceInput {
        /// The op.
        op: &'static str,
        /// What was wrong, and where.
        what: String,
    },
    /// A kernel of `op` never finished although every wait it has that can give up would have:
    /// one of its CTAs is stuck where nothing is bounded (see
    /// [`crate::gpu::Gpu::synchronize_bounded`]). `report` is what its bounded waits (or the
    /// proxy) reported meanwhile, often the first sign of what went wrong. End the process.
    #[error(
        "{op}: {stuck}{}",
        report.as_ref().map(|r| format!("; reported meanwhile: {r}")).unwrap_or_else(|| "; nothing was reported".into())
    )]
    KernelStuck {
        /// The op.
        op: &'static str,
        /// How long, with how many launches queued.
        stuck: GpuError,
        /// The first report its kernels or the proxy left, if any.
        report: Option<Box<Error>>,
    },
    /// A bounded wait on the device gave up; the kernel stopped instead of hanging.
    #[error("device wait timed out: {0}")]
    DeviceTimeout(WaitReport),
}

/// Result of an mkernel operation.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where an op's bounded device waits report (see [`crate::abi::Diag`]): a host-mapped
/// [`WaitDiag`] record, readable even after the kernel stopped, and the device-side abort word.
/// Both are sticky: once a wait gave up, the op reports it and later launches give up at once.
pub struct DiagBuffers {
    record: crate::gpu::MappedBuffer<WaitDiag>,
    abort: crate::gpu::DeviceBuffer<u32>,
    timeout: std::time::Duration,
}

/// The shortest bound an op's device waits may have.
pub const MIN_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1);
/// The longest bound an op's device waits may have (their clocks wrap after 2^42 ns, about 73
/// minutes).
pub const MAX_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3600);

impl DiagBuffers {
    /// A clean record and abort word on `gpu`, for kernels whose waits give up after `timeout`
    /// (what [`DiagBuffers::wait`] allows a launch).
    ///
    /// `timeout` is an op's `timeout` option: a typed error outside
    /// [`MIN_TIMEOUT`]..=[`MAX_TIMEOUT`], before anything launches.
    pub fn new(gpu: &crate::Gpu, timeout: std::time::Duration) -> Result<Self> {
        if !(MIN_TIMEOUT..=MAX_TIMEOUT).contains(&timeout) {
            return Err(invalid(
                "timeout",
                format!(
                    "{timeout:?} must be between {MIN_TIMEOUT:?} and {MAX_TIMEOUT:?}: every device wait gives up after it \
                     (zero: at once), and device clocks are kept in 32-bit units of 1024 ns, which wrap after 73 minutes"
                ),
            ));
        }
        Ok(Self { record: gpu.mapped::<WaitDiag>(1)?, abort: gpu.upload(&[0u32])?, timeout })
    }

    /// Wait for `gpu`'s stream, bounded by this record's timeout
    /// ([`crate::gpu::StreamBound::for_device_timeout`]), then report what this record holds and
    /// what `others` find (whatever else the op's kernels report into: other records, the proxy)
    /// before a driver error. A stream still busy past the bound is [`Error::KernelStuck`], with
    /// what they found meanwhile: the bounded waits' reports are read while the stream is busy.
    pub fn wait(&self, gpu: &crate::Gpu, op: &'static str, others: impl Fn() -> Result<()>) -> Result<()> {
        let checks = || self.check().and_then(|()| others());
        let bound = crate::gpu::StreamBound::for_device_timeout(self.timeout);
        let sync = gpu.synchronize_bounded(bound, || checks().is_err());
        if let Err(stuck @ GpuError::KernelStuck { .. }) = sync {
            return Err(Error::KernelStuck { op, stuck, report: checks().err().map(Box::new) });
        }
        checks()?;
        Ok(sync?)
    }

    /// What kernels take.
    pub fn abi(&self) -> crate::abi::Diag {
        crate::abi::Diag { record: self.record.device_addr(), abort: self.abort.addr() }
    }

    /// `Err(DeviceTimeout)` when a bounded device wait recorded a report.
    pub fn check(&self) -> Result<()> {
        let d = self.record.read(0);
        if d.status != crate::abi::DIAG_OK {
            return Err(Error::DeviceTimeout(WaitReport(d)));
        }
        Ok(())
    }

    /// The raw record (tests).
    pub fn record(&self) -> WaitDiag {
        self.record.read(0)
    }
}

pub(crate) fn invalid(arg: &'static str, rule: impl Into<String>) -> Error {
    Error::InvalidArgument { arg, rule: rule.into() }
}

/// Buffer `arg` holds `have` elements where the shape needs `want`: an error naming it when short.
pub(crate) fn need_len(arg: &'static str, have: usize, want: usize) -> Result<()> {
    if have < want {
        Err(invalid(arg, format!("holds {have} elements; the shape needs {want}")))
    } else {
        Ok(())
    }
}
