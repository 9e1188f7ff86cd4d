//! Waiting for a stream without ever blocking for good. mkernel's kernels wait on flags and
//! mbarriers with device-side bounds, so a launch ends (reporting who waited for what) even when a
//! peer never answers. What those bounds cannot cover is a kernel stuck where nothing is bounded:
//! a TMA completion that never comes, a block barrier some thread never reaches. A plain
//! `cuStreamSynchronize` then blocks the host for ever and hides every report the other CTAs
//! wrote. [`Gpu::synchronize_bounded`] polls instead, and gives up once the stream stayed busy
//! longer than any launch of bounded waits can take.
use super::error::{check, GpuError, Result};
use super::Gpu;
use cust_raw as sys;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// What a launch may take beside its device timeout: its own work (a few milliseconds to a few
/// seconds for the shapes the ops take) with a wide margin, so that a slow but healthy launch is
/// never called stuck.
pub const RUN_ALLOWANCE: Duration = Duration::from_secs(10);

/// How long [`Gpu::synchronize_bounded`] lets a stream stay busy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamBound {
    /// The most one launch may take, failed waits included: the stream may stay busy this long
    /// for each launch queued on it since it last drained.
    pub per_launch: Duration,
    /// Once a kernel's bounded wait reported, the stream must drain within this: the launch's
    /// other waits give up within about a millisecond (the abort word), later launches at their
    /// first wait, so only the CTAs' remaining work is left.
    pub after_report: Duration,
}

impl StreamBound {
    /// For work whose device timeout is not known where it is waited for (timing brackets,
    /// benches): a minute per launch beyond [`RUN_ALLOWANCE`], far above the ops' default device
    /// timeout (10 s). An op's own `wait` knows its timeout and bounds tighter.
    pub const UNKNOWN: StreamBound = StreamBound {
        per_launch: Duration::from_secs(60 + RUN_ALLOWANCE.as_secs()),
        after_report: Duration::from_secs(60 + RUN_ALLOWANCE.as_secs()),
    };

    /// The bound for kernels whose device waits give up after `timeout`: a launch may take
    /// `timeout` plus [`RUN_ALLOWANCE`], and so may the drain after a report.
    pub fn for_device_timeout(timeout: Duration) -> Self {
        let per_launch = timeout.saturating_add(RUN_ALLOWANCE);
        Self { per_launch, after_report: per_launch }
    }

    /// Whether work still busy after `busy`, with `pending` launches queued when the wait began
    /// and a report seen `since_report` ago (if any), is past this bound.
    pub fn exceeded(&self, pending: u64, busy: Duration, since_report: Option<Duration>) -> bool {
        let all = self.per_launch.saturating_mul(pending.clamp(1, u32::MAX as u64) as u32);
        busy > all || since_report.is_some_and(|s| s > self.after_report)
    }
}

/// How often the mapped reports are read while a stream is busy.
const REPORT_POLL: Duration = Duration::from_millis(1);

impl Gpu {
    /// Launches enqueued through this handle that no wait has seen finish (a graph replay counts
    /// the launches it captured; at least 1, since copies are not counted).
    pub fn pending_launches(&self) -> u64 {
        let launched = self.launched.load(Ordering::Relaxed);
        launched.saturating_sub(self.drained.load(Ordering::Relaxed)).max(1)
    }

    /// Wait for this handle's stream, but give up with [`GpuError::KernelStuck`] once it stayed
    /// busy past `bound`: [`StreamBound::per_launch`] times the launches queued, or
    /// [`StreamBound::after_report`] after `reported` first returned true (a kernel's bounded
    /// wait wrote its report into host-mapped memory: it is read while the stream is busy).
    ///
    /// After `KernelStuck` the stream cannot drain: from then on this process leaks device and
    /// mapped memory instead of freeing it (a free would block behind the stuck kernel, see
    /// [`super::leaked_frees`]). End the process; the driver reclaims the GPU.
    pub fn synchronize_bounded(&self, bound: StreamBound, mut reported: impl FnMut() -> bool) -> Result<()> {
        let pending = self.pending_launches();
        let (mut report_at, mut last_poll) = (None::<Instant>, None::<Instant>);
        self.poll_stream(|busy| {
            let now = Instant::now();
            if report_at.is_none() && last_poll.is_none_or(|t| now - t >= REPORT_POLL) {
                last_poll = Some(now);
                if reported() {
                    report_at = Some(now);
                }
            }
            let after_report = report_at.map(|t| now - t);
            bound.exceeded(pending, busy, after_report).then(|| {
                super::memory::mark_stuck();
                GpuError::KernelStuck { busy, pending, after_report }
            })
        })
    }

    /// Poll this handle's stream until it drained (the launches queued when the poll began then
    /// count as drained) or until `give_up`, given how long the stream has been busy, names the
    /// error to return.
    pub(super) fn poll_stream(&self, mut give_up: impl FnMut(Duration) -> Option<GpuError>) -> Result<()> {
        self.make_current()?;
        let launched = self.launched.load(Ordering::Relaxed);
        let start = Instant::now();
        loop {
            // SAFETY: this handle's stream is alive for as long as `self`.
            let r = unsafe { sys::cuStreamQuery(self.stream.as_inner()) };
            match r as u32 {
                0 => {
                    self.drained.fetch_max(launched, Ordering::Relaxed);
                    return Ok(());
                }
                600 => {} // CUDA_ERROR_NOT_READY
                _ => return check("cuStreamQuery", r),
            }
            let busy = start.elapsed();
            if let Some(e) = give_up(busy) {
                return Err(e);
            }
            // Spin briefly (most waits end within a few hundred microseconds of being called in
            // a loop of launches), then sleep so a long wait does not burn a core.
            if busy < Duration::from_micros(500) {
                std::thread::yield_now();
            } else {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: fn(u64) -> Duration = Duration::from_secs;

    #[test]
    fn bound_scales_with_the_queued_launches() {
        let b = StreamBound::for_device_timeout(S(10));
        assert_eq!(b.per_launch, S(20));
        assert!(!b.exceeded(1, S(20), None));
        assert!(b.exceeded(1, S(21), None));
        // Zero pending counts as one (a copy or a graph replay still gets a launch's allowance).
        assert!(!b.exceeded(0, S(20), None) && b.exceeded(0, S(21), None));
        // A hundred launches back to back may take a hundred allowances.
        assert!(!b.exceeded(100, S(1999), None) && b.exceeded(100, S(2001), None));
    }

    #[test]
    fn a_report_starts_its_own_shorter_clock() {
        let b = StreamBound { per_launch: S(100), after_report: S(2) };
        assert!(!b.exceeded(5, S(3), Some(S(2))));
        assert!(b.exceeded(5, S(3), Some(Duration::from_millis(2001))));
        // Without a report only the launches' allowance counts.
        assert!(!b.exceeded(5, S(499), None));
    }

    #[test]
    fn huge_timeouts_saturate_instead_of_overflowing() {
        let b = StreamBound::for_device_timeout(Duration::MAX);
        assert!(!b.exceeded(u64::MAX, Duration::MAX, None));
    }
}
