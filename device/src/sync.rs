//! Bounded waits. Every wait in mkernel gives up after a timeout (read from `%globaltimer`) and
//! records who waited for what in a host-readable [`WaitDiag`]; it also raises the launch's
//! device-side abort word, which tells every other wait on this GPU to give up too, so a broken
//! peer ends the kernel with a report instead of a hang. (See [`Diag`] for why the abort word
//! lives in device memory.)
use crate::abi::{Diag, WaitDiag, DIAG_CLAIMED, DIAG_OK, DIAG_TIMED_OUT};
use crate::arch::*;

/// Where a wait happens, for the report.
#[derive(Clone, Copy)]
pub struct WaitSite {
    /// The waiting rank.
    pub rank: u32,
    /// The waiting CTA's role (a [`Role`](crate::sched::Role) as `u32`).
    pub role: u32,
    /// What the wait is about: a tile index, or a peer or chunk for communication roles.
    pub tile: u32,
    /// The kind of wait (`WAIT_FLAG`, `WAIT_MBAR_FULL`, `WAIT_MBAR_EMPTY`, `WAIT_MBAR_HANDOFF`).
    pub what: u32,
}

/// What every bounded wait of one role in one launch shares: the bound, the report's destination
/// and who is waiting. [`Bound::site`] adds the per-wait details.
/// It borrows the launch's [`Diag`] from the kernel's parameters (read from the parameter space
/// when needed, so it occupies no registers in the GEMM consumers).
#[derive(Clone, Copy)]
pub struct Bound<'p> {
    /// How long any one wait may take, in ns of `%globaltimer`.
    pub timeout_ns: u64,
    /// Where a timeout is reported and the abort word is.
    pub diag: &'p Diag,
    /// The waiting rank (for the report).
    pub rank: u32,
    /// The waiting CTAs' role (a [`Role`](crate::sched::Role) as `u32`).
    pub role: u32,
}

impl Bound<'_> {
    /// The report fields of a wait on `tile` (or peer, or chunk) of kind `what` (`WAIT_*`).
    #[inline(always)]
    pub const fn site(&self, tile: u32, what: u32) -> WaitSite {
        WaitSite { rank: self.rank, role: self.role, tile, what }
    }

    /// Wait until the 32-bit flag at `flag` reaches epoch `epoch` ([`wait_flag_sys_u32`]).
    ///
    /// # Safety
    /// As [`wait_flag_sys_u32`].
    #[inline(always)]
    pub unsafe fn flag(&self, flag: *const u32, epoch: u32, tile: u32) -> WaitResult {
        wait_flag_sys_u32(flag, epoch, self.timeout_ns, self.diag, self.site(tile, crate::abi::WAIT_FLAG))
    }

    /// [`Bound::flag`] for a flag only this GPU writes (GPU-scope acquire: no system-wide
    /// ordering to wait for).
    ///
    /// # Safety
    /// As [`wait_flag_sys_u32`], the writer on this GPU.
    #[inline(always)]
    pub unsafe fn flag_gpu(&self, flag: *const u32, epoch: u32, tile: u32) -> WaitResult {
        wait_flag_u32::<false>(flag, epoch, self.timeout_ns, self.diag, self.site(tile, crate::abi::WAIT_FLAG))
    }

    /// Wait for an mbarrier phase ([`wait_mbarrier`]).
    ///
    /// # Safety
    /// As [`wait_mbarrier`].
    #[inline(always)]
    pub unsafe fn mbarrier(&self, bar: u32, parity: u32, tile: u32, what: u32) -> WaitResult {
        wait_mbarrier(bar, parity, self.timeout_ns, self.diag, self.site(tile, what))
    }
}

/// Outcome of a bounded wait: `Err` means give up (this wait timed out, or another one did).
pub type WaitResult = Result<(), ()>;

/// Flags carry epochs that only grow (modulo wrap): `seen` has reached `expected` when it is at
/// or past it. This keeps a slow waiter from hanging if a fast peer already moved on.
#[inline(always)]
pub const fn epoch_reached(seen: u64, expected: u64) -> bool {
    (seen.wrapping_sub(expected) as i64) >= 0
}

/// True when some wait on this GPU already gave up (`diag.abort` set).
///
/// # Safety
/// `diag.abort` is 0 or a live device `u32`.
#[inline(always)]
pub unsafe fn aborted(diag: &Diag) -> bool {
    diag.abort != 0 && ld_relaxed_gpu_u32(diag.abort as *const u32) != 0
}

/// Record a timeout (first reporter wins) and make every other wait give up.
///
/// # Safety
/// `diag.record` is 0 or a live `WaitDiag` in memory the host can read (mapped host memory);
/// `diag.abort` is 0 or a live device `u32`.
#[inline(always)]
pub unsafe fn report_timeout(diag: &Diag, site: WaitSite, addr: u64, expected: u64, seen: u64, waited_ns: u64) {
    let d = diag.record as *mut WaitDiag;
    let status = &raw mut (*d).status;
    // The reporter that flips the device-memory abort word is the one that writes the record. A
    // system-scope atomic on the host-mapped record itself would need host-native atomics, which
    // PCIe-attached GPUs lack (compute-sanitizer flags it). Without an abort word the record is
    // claimed by a plain check, good enough for the tests that run so.
    let first = if diag.abort != 0 {
        atom_cas_relaxed_gpu_u32(diag.abort as *mut u32, 0, 1) == 0
    } else {
        !d.is_null() && ld_relaxed_sys_u32(status) == DIAG_OK
    };
    if !first || d.is_null() {
        return;
    }
    st_relaxed_sys_u32(status, DIAG_CLAIMED);
    st_relaxed_sys_u32(&raw mut (*d).rank, site.rank);
    st_relaxed_sys_u32(&raw mut (*d).role, site.role);
    st_relaxed_sys_u32(&raw mut (*d).cta, block_idx_x_here());
    st_relaxed_sys_u32(&raw mut (*d).tile, site.tile);
    st_relaxed_sys_u32(&raw mut (*d).what, site.what);
    st_relaxed_sys_u64(&raw mut (*d).flag_addr, addr);
    st_relaxed_sys_u64(&raw mut (*d).expected, expected);
    st_relaxed_sys_u64(&raw mut (*d).seen, seen);
    st_relaxed_sys_u64(&raw mut (*d).waited_ns, waited_ns);
    st_release_sys_u32(status, DIAG_TIMED_OUT);
}

/// How long a thread about to stop its context waits for another wait's report to be complete.
const REPORT_GRACE_NS: u64 = 100_000_000;

/// Before a thread stops its context (`trap`) because some wait gave up: wait, bounded by
/// [`REPORT_GRACE_NS`], until that wait's record is complete. Its reporter flips the abort word
/// before it writes the record, so a thread that gave up on the abort word could otherwise stop
/// the context between the two, and the host would read a bare launch failure instead of who
/// waited for what. Returns at once when this thread's own wait wrote the record.
///
/// # Safety
/// `diag` as in [`report_timeout`].
#[inline(always)]
pub unsafe fn let_report_land(diag: &Diag) {
    if diag.record == 0 {
        return;
    }
    let status = &raw const (*(diag.record as *const WaitDiag)).status;
    let start = globaltimer_ns();
    while ld_acquire_sys_u32(status) != DIAG_TIMED_OUT && globaltimer_ns() - start < REPORT_GRACE_NS {
        nanosleep(1024);
    }
}

/// Stop this GPU's context (`trap`) after a wait gave up: once the report is whole
/// ([`let_report_land`]) and this thread's writes reached the host.
///
/// # Safety
/// `diag` as in [`report_timeout`].
#[inline(always)]
pub unsafe fn stop(diag: &Diag) -> ! {
    let_report_land(diag);
    fence_acq_rel_sys();
    trap()
}

/// Longest pause between two polls of a flag. A fused GEMM has one poller per CTA (its
/// producer thread); polling back to back, they once slowed a concurrent copy a thousandfold on
/// an H100. Pausing keeps polls cheap and adds at most this much to the time a waiter notices
/// its data.
const MAX_POLL_PAUSE_NS: u32 = 2048;
/// How often a waiting thread looks at the abort word. Every consumer thread of every CTA may be
/// waiting at once (tens of thousands): reading a shared word more often than this would itself
/// load the memory system; a timeout is reported this much later at most.
const CHECK_INTERVAL_NS: u64 = 1_000_000;
/// Polls of an mbarrier between two readings of the clock.
const POLLS_PER_CLOCK: u32 = 64;

/// The clock and abort side of a spinning wait: gives up when the launch aborted or the wait
/// outlived its bound (then it reports). Times are `%globaltimer` in units of 1024 ns, kept in
/// 32 bits (they wrap after 73 minutes): two registers, which the consumers of the GEMM mainloop,
/// holding 128 accumulators each, can spare without spilling.
pub struct Deadline {
    start: u32,
    next: u32,
}

/// [`CHECK_INTERVAL_NS`] in timer units.
const CHECK_UNITS: u32 = (CHECK_INTERVAL_NS >> 10) as u32;

#[inline(always)]
fn now_units() -> u32 {
    (globaltimer_ns() >> 10) as u32
}

impl Deadline {
    /// Start the clock.
    #[inline(always)]
    pub fn start() -> Self {
        let now = now_units();
        Self { start: now, next: now.wrapping_add(CHECK_UNITS) }
    }

    /// `Err` when it is time to give up; `report(waited_ns)` runs when this wait is the one that
    /// timed out.
    ///
    /// # Safety
    /// `diag` as in [`report_timeout`].
    #[inline(always)]
    pub unsafe fn check(&mut self, timeout_ns: u64, diag: &Diag, report: impl FnOnce(u64)) -> WaitResult {
        let now = now_units();
        if (now.wrapping_sub(self.next) as i32) < 0 {
            return Ok(());
        }
        self.next = now.wrapping_add(CHECK_UNITS);
        if aborted(diag) {
            return Err(());
        }
        let waited = (now.wrapping_sub(self.start) as u64) << 10;
        if waited > timeout_ns {
            report(waited);
            return Err(());
        }
        Ok(())
    }
}

/// Wait (system-scope acquire) until the 32-bit flag at `flag` reaches epoch `expected`. Polls
/// with relaxed loads and growing pauses, and acquires once the value is there.
///
/// # Safety
/// `flag` is a valid, aligned address another agent writes with release stores; `diag` as in
/// [`report_timeout`].
#[inline(always)]
pub unsafe fn wait_flag_sys_u32(
    flag: *const u32,
    expected: u32,
    timeout_ns: u64,
    diag: &Diag,
    site: WaitSite,
) -> WaitResult {
    wait_flag_u32::<true>(flag, expected, timeout_ns, diag, site)
}

/// [`wait_flag_sys_u32`] at system scope (`SYS`: writers on other GPUs or the host) or GPU scope
/// (writers on this GPU only, which a system-scope acquire would make wait for nothing).
///
/// # Safety
/// As [`wait_flag_sys_u32`].
#[inline(always)]
pub unsafe fn wait_flag_u32<const SYS: bool>(
    flag: *const u32,
    expected: u32,
    timeout_ns: u64,
    diag: &Diag,
    site: WaitSite,
) -> WaitResult {
    let reached = |v: u32| (v.wrapping_sub(expected) as i32) >= 0;
    let acquire = || if SYS { ld_acquire_sys_u32(flag) } else { ld_acquire_gpu_u32(flag) };
    if reached(acquire()) {
        return Ok(());
    }
    let mut deadline = Deadline::start();
    let mut pause = 32u32;
    loop {
        nanosleep(pause);
        pause = if pause < MAX_POLL_PAUSE_NS { 2 * pause } else { MAX_POLL_PAUSE_NS };
        let v = if SYS { ld_relaxed_sys_u32(flag) } else { ld_relaxed_gpu_u32(flag) };
        if reached(v) {
            // The relaxed poll saw the release; this load synchronises with it.
            acquire();
            return Ok(());
        }
        deadline.check(timeout_ns, diag, |waited| {
            report_timeout(diag, site, flag as u64, expected as u64, v as u64, waited)
        })?;
    }
}

/// Wait until the mbarrier at shared address `bar` completes the phase of parity `parity`.
///
/// # Safety
/// `bar` is an initialised mbarrier of this CTA; `diag` as in [`report_timeout`].
#[inline(always)]
pub unsafe fn wait_mbarrier(bar: u32, parity: u32, timeout_ns: u64, diag: &Diag, site: WaitSite) -> WaitResult {
    // Kept inline: a call inside a wgmma pipeline makes ptxas serialise the wgmmas.
    if mbarrier_try_wait_parity(bar, parity) {
        return Ok(());
    }
    let mut deadline = Deadline::start();
    let mut polls = 0u32;
    loop {
        if mbarrier_try_wait_parity(bar, parity) {
            return Ok(());
        }
        polls += 1;
        if polls.is_multiple_of(POLLS_PER_CLOCK) {
            deadline.check(timeout_ns, diag, |waited| {
                report_timeout(diag, site, bar as u64, parity as u64, 1 - parity as u64, waited)
            })?;
        }
    }
}
