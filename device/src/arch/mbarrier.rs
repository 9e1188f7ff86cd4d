//! Shared-memory transaction barriers (`mbarrier`): the handshake between TMA producers and
//! wgmma consumers. Addresses are 32-bit shared-space addresses of 8-byte aligned `u64` slots.
use core::arch::asm;

/// Initialise the barrier at `bar` to expect `count` arrivals per phase.
///
/// # Safety
/// `bar` must be an 8-byte aligned shared address that no thread is using as a barrier yet.
#[inline(always)]
pub unsafe fn mbarrier_init(bar: u32, count: u32) {
    asm!("mbarrier.init.shared::cta.b64 [{b}], {c};", b = in(reg32) bar, c = in(reg32) count, options(nostack))
}

/// Make barrier initialisation visible to the other threads, the cluster and the async proxy
/// (TMA). Follow it with a block (or cluster) barrier before anyone uses the barriers.
#[inline(always)]
pub fn fence_mbarrier_init() {
    unsafe { asm!("fence.mbarrier_init.release.cluster;", "fence.proxy.async.shared::cta;", options(nostack)) }
}

/// Arrive once on the barrier (release semantics at CTA scope).
///
/// # Safety
/// `bar` must be an initialised barrier in this CTA's shared memory.
#[inline(always)]
pub unsafe fn mbarrier_arrive(bar: u32) {
    asm!("mbarrier.arrive.shared::cta.b64 _, [{b}];", b = in(reg32) bar, options(nostack))
}

/// Arrive once and tell the barrier to also wait for `tx_bytes` bytes of asynchronous copies
/// (the TMA loads that complete on it) before the phase can complete.
///
/// # Safety
/// `bar` must be an initialised barrier in this CTA's shared memory.
#[inline(always)]
pub unsafe fn mbarrier_arrive_expect_tx(bar: u32, tx_bytes: u32) {
    asm!("mbarrier.arrive.expect_tx.shared::cta.b64 _, [{b}], {t};", b = in(reg32) bar,
         t = in(reg32) tx_bytes, options(nostack))
}

/// True once the phase with parity `parity` (0 or 1) has completed. The hardware may suspend the
/// thread for a while before answering false, so a loop on this is not a hot spin.
///
/// # Safety
/// `bar` must be an initialised barrier in this CTA's shared memory.
#[inline(always)]
pub unsafe fn mbarrier_try_wait_parity(bar: u32, parity: u32) -> bool {
    let r: u32;
    asm!("{{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [{b}], {ph}; selp.u32 {r}, 1, 0, p; }}",
         r = out(reg32) r, b = in(reg32) bar, ph = in(reg32) parity, options(nostack));
    r != 0
}

/// Invalidate a barrier so its memory can be reused for other data.
///
/// # Safety
/// No thread may be waiting on or arriving at `bar`.
#[inline(always)]
pub unsafe fn mbarrier_inval(bar: u32) {
    asm!("mbarrier.inval.shared::cta.b64 [{b}];", b = in(reg32) bar, options(nostack))
}
