//! The GPU side of the FIFO: pushing commands for the CPU proxy.
use crate::abi::*;
use crate::arch::*;
use crate::sync::{report_timeout, wait_flag_sys_u32, Bound, Deadline, WaitResult, WaitSite};

/// Raise the `u32` flag at heap offset `flag_off` of rank `to` (on another node) to `value`
/// through the proxy: one SIGNAL command, pushed as [`fifo_push`] does; a full FIFO that never
/// drains is reported through `b` as a wait on `to`.
///
/// # Safety
/// As [`fifo_push`].
#[inline(always)]
pub unsafe fn signal_remote(f: &FifoParams, to: u32, flag_off: u64, value: u32, b: &Bound<'_>) -> WaitResult {
    let cmd = FifoCmd {
        header: FifoCmd::header_word(OP_SIGNAL, 0, to, 0),
        flag: FifoCmd::loc(BUF_HEAP, flag_off),
        flag_value: value as u64,
        ..Default::default()
    };
    fifo_push(f, cmd, b.timeout_ns, b.diag, b.site(to, WAIT_FLAG)).map(|_| ())
}

/// Push one command (all fields but the header's ticket are the caller's), with the host's ticket
/// protocol (`host/comm/fifo.rs`): a ticket is claimed only once its slot is free. The lanes of a
/// warp that push together claim their tickets as one block: the lowest lane reads the head,
/// waits (bounded) while the block's last slot is still taken, then moves the head on by the
/// block with a GPU-scope compare-and-swap (retrying with the head it saw when another producer
/// won), and hands each lane its ticket. So a push that times out has claimed nothing and leaves
/// no hole that would stop delivery of every later command, and thousands of pushing threads
/// contend once per warp, not once per thread. Then each lane writes its body and publishes the
/// header with a system-scope release store. Returns the lane's ticket (for [`fifo_quiet`]).
///
/// # Safety
/// `f` describes a live FIFO (ring and tail in host-mapped memory, head in device memory), the
/// same one for every lane of the warp that calls it at the same time; `diag` as in
/// [`report_timeout`].
#[inline(always)]
pub unsafe fn fifo_push(
    f: &FifoParams,
    mut cmd: FifoCmd,
    timeout_ns: u64,
    diag: &Diag,
    site: WaitSite,
) -> Result<u64, ()> {
    let head = f.head as *mut u64;
    let tail = f.tail as *const u64;
    let cache = f.tail_cache as *mut u64;
    let lane = lane_id();
    // A ring smaller than a warp could never hold a whole warp's block: lanes then claim alone.
    let mask = if f.capacity >= 32 { active_mask() } else { 1 << lane };
    let leader = mask.trailing_zeros();
    let block = mask.count_ones() as u64;
    let mut first = 0u64;
    let mut claimed = true;
    if lane == leader {
        claimed = claim(f, head, tail, cache, block, timeout_ns, diag, site).map(|t| first = t).is_ok();
    }
    let lo = shfl_idx_in(mask, first as u32, leader) as u64;
    let hi = shfl_idx_in(mask, (first >> 32) as u32, leader) as u64;
    if shfl_idx_in(mask, claimed as u32, leader) == 0 {
        return Err(());
    }
    let ticket = (hi << 32 | lo) + (mask & ((1u32 << lane) - 1)).count_ones() as u64;
    let slot = (f.ring as *mut u64).add(((ticket & (f.capacity - 1)) * 8) as usize);
    cmd.pushed_ns = globaltimer_ns();
    let words: [u64; 8] = bytemuck::cast(cmd);
    // Body as one 8-byte and three 16-byte stores (16-byte aligned: words 2-3, 4-5, 6-7 of the
    // 64-byte slot), fewer PCIe writes; the release store of the header orders them before it.
    st_global_u64(slot.add(1), words[1]);
    st_global_v2_u64(slot.add(2), [words[2], words[3]]);
    st_global_v2_u64(slot.add(4), [words[4], words[5]]);
    st_global_v2_u64(slot.add(6), [words[6], words[7]]);
    let header = (cmd.header & 0xffff_ffff) | ((ticket & 0xffff_ffff) << 32);
    st_release_sys_u64(slot, header);
    Ok(ticket)
}

/// Wait (bounded, reported through `b` as a wait on `who`) until the proxy released every
/// command below `through` (one past the last ticket [`fifo_push`] returned to this thread):
/// their sources have been read, so the caller may rewrite them. A kernel that pushed WRITEs
/// calls it before it ends; `through` 0 (nothing pushed) returns at once.
///
/// # Safety
/// As [`fifo_push`].
#[inline(always)]
pub unsafe fn fifo_quiet(f: &FifoParams, through: u64, b: &Bound<'_>, who: u32) -> WaitResult {
    if through == 0 {
        return Ok(());
    }
    // The position's low word, compared with wrap-around like an epoch (fewer than 2^31
    // commands are ever in flight).
    let site = b.site(who, WAIT_FIFO_RELEASED);
    wait_flag_sys_u32(f.released as *const u32, through as u32, b.timeout_ns, b.diag, site)
}

/// [`fifo_quiet`] through every ticket claimed so far (this thread's included): for kernels
/// whose pushes come from several call sites.
///
/// # Safety
/// As [`fifo_push`].
#[inline(always)]
pub unsafe fn fifo_quiet_claimed(f: &FifoParams, b: &Bound<'_>, who: u32) -> WaitResult {
    fifo_quiet(f, ld_relaxed_gpu_u64(f.head as *mut u64), b, who)
}

/// The claiming lane of [`fifo_push`]: `block` consecutive tickets whose slots are all free, or
/// `Err` after the bound (reported, nothing claimed).
///
/// # Safety
/// As [`fifo_push`]; `head`, `tail` and `cache` are `f`'s.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn claim(
    f: &FifoParams,
    head: *mut u64,
    tail: *const u64,
    cache: *mut u64,
    block: u64,
    timeout_ns: u64,
    diag: &Diag,
    site: WaitSite,
) -> Result<u64, ()> {
    let mut ticket = ld_relaxed_gpu_u64(head);
    let mut deadline: Option<Deadline> = None;
    loop {
        // The block's last ticket decides. The cached tail only lags the real one, so passing
        // this check is always safe; only when the ring looks full do we pay a PCIe read of the
        // real tail.
        let last = ticket + block - 1;
        if last >= ld_acquire_gpu_u64(cache) + f.capacity {
            let t = ld_acquire_sys_u64(tail);
            // Release: a producer that learns this tail only through the cache is still ordered
            // after the proxy's clearing of the slot (which precedes its release of `tail`).
            atom_max_acq_rel_gpu_u64(cache, t);
            if last >= t + f.capacity {
                let d = deadline.get_or_insert_with(Deadline::start);
                d.check(timeout_ns, diag, |waited| {
                    report_timeout(diag, site, f.tail, last + 1 - f.capacity, t, waited)
                })?;
                nanosleep(64);
                ticket = ld_relaxed_gpu_u64(head);
                continue;
            }
        }
        let seen = atom_cas_relaxed_gpu_u64(head, ticket, ticket + block);
        if seen == ticket {
            return Ok(ticket);
        }
        ticket = seen;
    }
}
