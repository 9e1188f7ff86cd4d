//! Flags that announce data, counters that tell the last of several writers it is last, and the
//! launch epoch every flag carries.
//!
//! Epochs: flags are never reset. Launch `e` (1, 2, ...) raises flags to `e`, and a waiter for
//! launch `e` accepts any value at or past `e`. The epoch comes from a device counter that every
//! CTA of a launch bumps once ([`launch_epoch`]), not from the host, so a launch captured in a CUDA
//! graph gets a new epoch at every replay.
use crate::arch::*;
use crate::sync::{Bound, WaitResult};

/// The epoch of this launch (1, 2, ...), for a grid of `ctas` CTAs that each call this exactly
/// once (one thread per CTA). The counter's high half counts finished launches, its low half the
/// CTAs of the current one that arrived; the last to arrive moves the count on. Launches on one
/// stream run one after another, so every CTA of a launch reads the same high half, whatever the
/// grid sizes of earlier launches (a fused op may alternate a full grid with a comm-only one).
///
/// # Safety
/// `counter` is a device `u64`, zero before the first launch, used only by launches of one op
/// on one stream; `ctas` is at least 1.
#[inline(always)]
pub unsafe fn launch_epoch(counter: *mut u64, ctas: u32) -> u32 {
    let old = atom_add_relaxed_gpu_u64(counter, 1);
    if (old as u32).wrapping_add(1) == ctas {
        atom_add_relaxed_gpu_u64(counter, (1u64 << 32).wrapping_sub(ctas as u64));
    }
    ((old >> 32) as u32).wrapping_add(1)
}

/// Make this thread's earlier writes (ordinary stores, and bulk copies it already waited for
/// with `bulk_wait_group`) visible system-wide, then set the flag at `flag` to `epoch`.
///
/// # Safety
/// `flag` is a valid, aligned `u32` (local, peer or host-mapped memory).
#[inline(always)]
pub unsafe fn signal(flag: *mut u32, epoch: u32) {
    fence_proxy_async_global();
    fence_acq_rel_sys();
    st_release_sys_u32(flag, epoch);
}

/// [`signal`] for a flag only this GPU reads, after generic-proxy writes only: a GPU-scope
/// release (a system-scope fence would wait for system-wide visibility nobody needs).
///
/// # Safety
/// `flag` is a valid, aligned `u32` of this GPU's memory.
#[inline(always)]
pub unsafe fn signal_gpu(flag: *mut u32, epoch: u32) {
    st_release_gpu_u32(flag, epoch);
}

/// Make this thread's earlier writes (bulk copies it already waited for included) visible
/// system-wide, then add one to `counter`: a counter a host stream's memory wait reads before
/// the copy engines copy what it counts (that stream sets it back to zero, not this).
///
/// # Safety
/// `counter` is a valid, aligned `u32` of this GPU's memory.
#[inline(always)]
pub unsafe fn count_published(counter: *mut u32) {
    fence_proxy_async_global();
    fence_acq_rel_sys();
    atom_add_acq_rel_sys_u32(counter, 1);
}

/// One of `writers` per launch finishing its part: true for the last one of launch `epoch`. The
/// counter only grows (each launch adds `writers`), so nothing is reset between launches.
///
/// # Safety
/// `counter` is a valid `u32` that only these writers add to, once each per launch.
#[inline(always)]
pub unsafe fn last_arriver(counter: *mut u32, writers: u32, epoch: u32) -> bool {
    last_arriver_at::<true>(counter, writers, epoch)
}

/// [`last_arriver`] among writers on this GPU only, whose last one then announces the whole to
/// others itself (with a system-scope [`signal`]): GPU-scope ordering suffices for the count.
///
/// # Safety
/// As [`last_arriver`].
#[inline(always)]
pub unsafe fn last_arriver_gpu(counter: *mut u32, writers: u32, epoch: u32) -> bool {
    last_arriver_at::<false>(counter, writers, epoch)
}

/// [`last_arriver`] publishing at system scope (`SYS`) or GPU scope.
///
/// # Safety
/// As [`last_arriver`].
#[inline(always)]
unsafe fn last_arriver_at<const SYS: bool>(counter: *mut u32, writers: u32, epoch: u32) -> bool {
    fence_proxy_async_global();
    let before = if SYS {
        fence_acq_rel_sys();
        atom_add_acq_rel_sys_u32(counter, 1)
    } else {
        atom_add_acq_rel_gpu_u32(counter, 1)
    };
    before.wrapping_add(1) == epoch.wrapping_mul(writers)
}

/// One of `writers` finishing its part of this launch, its earlier writes (bulk copies it
/// waited for included) published system-wide first: true for the last, which also sets the
/// counter back to zero. For counters that not every launch of an op advances (an epoch
/// multiple would then drift), at the price of an abandoned launch leaving it part-way.
///
/// # Safety
/// `counter` is a valid `u32`, zero before the launch, that only these writers add to, once
/// each per launch.
#[inline(always)]
pub unsafe fn last_arriver_reset(counter: *mut u32, writers: u32) -> bool {
    fence_proxy_async_global();
    fence_acq_rel_sys();
    let last = atom_add_acq_rel_sys_u32(counter, 1).wrapping_add(1) == writers;
    if last {
        // Every writer has arrived: nothing else touches the counter this launch.
        atom_add_acq_rel_gpu_u32(counter, writers.wrapping_neg());
    }
    last
}

/// Thread 0 of each of `ctas` CTAs of launch `epoch`, after a CTA barrier: publish the CTA's
/// writes, arrive at the barrier `counter`, and wait (bounded, reported as `tag`) for the
/// others. The counter only grows, as [`last_arriver`]'s.
///
/// # Safety
/// As [`last_arriver`]; every CTA of the `ctas` is resident (or already arrived).
#[inline(always)]
pub unsafe fn arrive_and_wait(counter: *mut u32, ctas: u32, epoch: u32, b: &Bound, tag: u32) -> WaitResult {
    last_arriver(counter, ctas, epoch);
    b.flag(counter, epoch.wrapping_mul(ctas), tag)
}
