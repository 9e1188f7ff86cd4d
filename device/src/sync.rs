//! Bounded waits. Every wait in mkernel gives up after a timeout (read from `%globaltimer`) and
//! records who waited for what in a host-readable [`WaitDiag`]; a non-zero diagnostic status
//! tells every other wait of the launch to give up too, so a broken peer ends the kernel with a
//! report instead of a hang.
use crate::abi::{WaitDiag, DIAG_CLAIMED, DIAG_OK, DIAG_TIMED_OUT};
use crate::arch::*;

/// Where a wait happens, for the report.
#[derive(Clone, Copy)]
pub struct WaitSite {
    pub rank: u32,
    pub role: u32,
    pub tile: u32,
    pub what: u32,
}

/// What every bounded wait of one role in one launch shares: the bound, the report's destination
/// and who is waiting. [`Bound::site`] adds the per-wait details.
#[derive(Clone, Copy)]
pub struct Bound {
    pub timeout_ns: u64,
    pub diag: *mut WaitDiag,
    pub rank: u32,
    pub role: u32,
}

impl Bound {
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

/// How often (in polls) a spinning wait reads the clock and the abort status.
const CHECK_EVERY: u32 = 64;

/// Flags carry epochs that only grow (modulo wrap): `seen` has reached `expected` when it is at
/// or past it. This keeps a slow waiter from hanging if a fast peer already moved on.
#[inline(always)]
pub const fn epoch_reached(seen: u64, expected: u64) -> bool {
    (seen.wrapping_sub(expected) as i64) >= 0
}

/// True when some wait of this launch already gave up.
///
/// # Safety
/// `diag` is null or points to a live `WaitDiag`.
#[inline(always)]
pub unsafe fn aborted(diag: *mut WaitDiag) -> bool {
    !diag.is_null() && ld_relaxed_sys_u32(&raw const (*diag).status) != DIAG_OK
}

/// Record a timeout (first reporter wins) and make every other wait give up.
///
/// # Safety
/// `diag` is null or points to a live `WaitDiag` in memory the host can read (mapped host memory).
#[inline(always)]
pub unsafe fn report_timeout(diag: *mut WaitDiag, site: WaitSite, addr: u64, expected: u64, seen: u64, waited_ns: u64) {
    if diag.is_null() {
        return;
    }
    let status = &raw mut (*diag).status;
    if atom_cas_acq_rel_sys_u32(status, DIAG_OK, DIAG_CLAIMED) != DIAG_OK {
        return;
    }
    st_relaxed_sys_u32(&raw mut (*diag).rank, site.rank);
    st_relaxed_sys_u32(&raw mut (*diag).role, site.role);
    st_relaxed_sys_u32(&raw mut (*diag).cta, block_idx_x());
    st_relaxed_sys_u32(&raw mut (*diag).tile, site.tile);
    st_relaxed_sys_u32(&raw mut (*diag).what, site.what);
    st_relaxed_sys_u64(&raw mut (*diag).flag_addr, addr);
    st_relaxed_sys_u64(&raw mut (*diag).expected, expected);
    st_relaxed_sys_u64(&raw mut (*diag).seen, seen);
    st_relaxed_sys_u64(&raw mut (*diag).waited_ns, waited_ns);
    st_release_sys_u32(status, DIAG_TIMED_OUT);
}

/// Wait (system-scope acquire) until the 32-bit flag at `flag` reaches epoch `expected`.
///
/// # Safety
/// `flag` is a valid, aligned address another agent writes with release stores; `diag` as in
/// [`report_timeout`].
#[inline(always)]
pub unsafe fn wait_flag_sys_u32(
    flag: *const u32,
    expected: u32,
    timeout_ns: u64,
    diag: *mut WaitDiag,
    site: WaitSite,
) -> WaitResult {
    let reached = |v: u32| (v.wrapping_sub(expected) as i32) >= 0;
    if reached(ld_acquire_sys_u32(flag)) {
        return Ok(());
    }
    let start = globaltimer_ns();
    let mut polls = 0u32;
    loop {
        let v = ld_acquire_sys_u32(flag);
        if reached(v) {
            return Ok(());
        }
        polls += 1;
        if polls % CHECK_EVERY == 0 {
            let waited = globaltimer_ns().wrapping_sub(start);
            if aborted(diag) {
                return Err(());
            }
            if waited > timeout_ns {
                report_timeout(diag, site, flag as u64, expected as u64, v as u64, waited);
                return Err(());
            }
        }
    }
}

/// Wait until the mbarrier at shared address `bar` completes the phase of parity `parity`.
///
/// # Safety
/// `bar` is an initialised mbarrier of this CTA; `diag` as in [`report_timeout`].
#[inline(always)]
pub unsafe fn wait_mbarrier(bar: u32, parity: u32, timeout_ns: u64, diag: *mut WaitDiag, site: WaitSite) -> WaitResult {
    // Kept inline: a call inside a wgmma pipeline makes ptxas serialise the wgmmas.
    if mbarrier_try_wait_parity(bar, parity) {
        return Ok(());
    }
    let start = globaltimer_ns();
    let mut polls = 0u32;
    loop {
        if mbarrier_try_wait_parity(bar, parity) {
            return Ok(());
        }
        polls += 1;
        if polls % CHECK_EVERY == 0 {
            let waited = globaltimer_ns().wrapping_sub(start);
            if aborted(diag) {
                return Err(());
            }
            if waited > timeout_ns {
                report_timeout(diag, site, bar as u64, parity as u64, 1 - parity as u64, waited);
                return Err(());
            }
        }
    }
}
