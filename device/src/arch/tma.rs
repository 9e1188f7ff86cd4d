//! The tensor memory accelerator (TMA): bulk tensor copies between global and shared memory.
//!
//! A tensor map (`CUtensorMap`, 128 bytes, 64-byte aligned) describes the global tensor, the box
//! and the swizzle; the host encodes it (`mkernel::gpu::TensorMap`) and copies it to device global
//! memory before the launch, so kernels take a plain generic pointer to it.
use core::arch::asm;

/// Load the 2-D box at element coordinates (`c0` innermost, `c1`) into shared memory at `dst`,
/// completing `box bytes` of transactions on the mbarrier `bar`. Out-of-bounds elements are
/// zero-filled, and the full box size is still credited to the barrier.
///
/// # Safety
/// `tmap` points to a valid tensor map in global memory; `dst` is a shared address aligned as the
/// map's swizzle requires (1024 bytes for 128-byte swizzle) with room for the box; `bar` is an
/// initialised mbarrier whose expected transaction count covers this copy.
#[inline(always)]
pub unsafe fn tma_load_2d(dst: u32, tmap: u64, bar: u32, c0: i32, c1: i32) {
    asm!(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}}}], [{b}];",
        d = in(reg32) dst, m = in(reg64) tmap, x = in(reg32) c0, y = in(reg32) c1, b = in(reg32) bar,
        options(nostack)
    )
}

/// Store the 2-D box at shared address `src` to the tensor at (`c0`, `c1`). Elements outside the
/// tensor are not written. Part of the current bulk async-group (see [`bulk_commit_group`]).
///
/// # Safety
/// `tmap` points to a valid tensor map in global memory; `src` holds a full box laid out as the
/// map's swizzle says, written by this thread's proxy fence ([`fence_proxy_async_shared`]) and
/// ordered before this call by a barrier.
#[inline(always)]
pub unsafe fn tma_store_2d(tmap: u64, src: u32, c0: i32, c1: i32) {
    asm!(
        "cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [{m}, {{{x}, {y}}}], [{s}];",
        m = in(reg64) tmap, x = in(reg32) c0, y = in(reg32) c1, s = in(reg32) src, options(nostack)
    )
}

/// Load the 4-D box at element coordinates (`c0` innermost .. `c3`) into shared memory at `dst`,
/// completing on `bar` as [`tma_load_2d`] does (out-of-bounds elements zero-filled, the full box
/// credited).
///
/// # Safety
/// As [`tma_load_2d`], for a rank-4 tensor map.
#[inline(always)]
pub unsafe fn tma_load_4d(dst: u32, tmap: u64, bar: u32, [c0, c1, c2, c3]: [i32; 4]) {
    asm!(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{m}, {{{x}, {y}, {z}, {w}}}], [{b}];",
        d = in(reg32) dst, m = in(reg64) tmap, x = in(reg32) c0, y = in(reg32) c1, z = in(reg32) c2,
        w = in(reg32) c3, b = in(reg32) bar, options(nostack)
    )
}

/// Store the 4-D box at shared address `src` to the tensor at (`c0` .. `c3`), clipped to the
/// tensor, as part of the current bulk async-group.
///
/// # Safety
/// As [`tma_store_2d`], for a rank-4 tensor map.
#[inline(always)]
pub unsafe fn tma_store_4d(tmap: u64, src: u32, [c0, c1, c2, c3]: [i32; 4]) {
    asm!(
        "cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [{m}, {{{x}, {y}, {z}, {w}}}], [{s}];",
        m = in(reg64) tmap, x = in(reg32) c0, y = in(reg32) c1, z = in(reg32) c2, w = in(reg32) c3,
        s = in(reg32) src, options(nostack)
    )
}

/// Close the current group of bulk stores.
#[inline(always)]
pub fn bulk_commit_group() {
    unsafe { asm!("cp.async.bulk.commit_group;", options(nostack)) }
}

/// Wait until at most `N` bulk store groups still *read* shared memory (their sources may then be
/// overwritten; the global writes may still be in flight).
#[inline(always)]
pub fn bulk_wait_group_read<const N: u32>() {
    unsafe { asm!("cp.async.bulk.wait_group.read {n};", n = const N, options(nostack)) }
}

/// Wait until at most `N` bulk store groups are incomplete (their global writes are done).
#[inline(always)]
pub fn bulk_wait_group<const N: u32>() {
    unsafe { asm!("cp.async.bulk.wait_group {n};", n = const N, options(nostack)) }
}

/// Prefetch a tensor map into the TMA unit's cache.
#[inline(always)]
pub fn prefetch_tensormap(tmap: u64) {
    unsafe { asm!("prefetch.tensormap [{m}];", m = in(reg64) tmap, options(nostack)) }
}

/// Order this thread's ordinary shared-memory writes before later async-proxy accesses (TMA
/// stores, wgmma operand reads) that a barrier orders after them.
#[inline(always)]
pub fn fence_proxy_async_shared() {
    unsafe { asm!("fence.proxy.async.shared::cta;", options(nostack)) }
}

/// Copy `bytes` (a multiple of 16, at most 2^20 - 1) from global `src` to shared `dst`, completing
/// them as transactions on the mbarrier `bar`. Both addresses 16-byte aligned.
///
/// # Safety
/// `src..src+bytes` is readable global memory; `dst` has room; `bar` is an initialised mbarrier
/// whose expected transaction count covers this copy.
#[inline(always)]
pub unsafe fn bulk_load(dst: u32, src: u64, bytes: u32, bar: u32) {
    asm!(
        "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [{d}], [{s}], {n}, [{b}];",
        d = in(reg32) dst, s = in(reg64) src, n = in(reg32) bytes, b = in(reg32) bar, options(nostack)
    )
}

/// Copy `bytes` (a multiple of 16) from shared `src` to global `dst` (which may be a peer GPU's
/// memory mapped over NVLink). Part of the current bulk async-group.
///
/// # Safety
/// `dst..dst+bytes` is writable global memory; `src` holds the bytes, written before this call
/// by the async proxy (a completed [`bulk_load`]) or fenced with [`fence_proxy_async_shared`].
#[inline(always)]
pub unsafe fn bulk_store(dst: u64, src: u32, bytes: u32) {
    asm!(
        "cp.async.bulk.global.shared::cta.bulk_group [{d}], [{s}], {n};",
        d = in(reg64) dst, s = in(reg32) src, n = in(reg32) bytes, options(nostack)
    )
}

/// Start bringing `bytes` (a multiple of 16) of global memory at `src` (16-byte aligned) into
/// L2, so that loads soon after hit there.
///
/// # Safety
/// `src..src+bytes` is global memory (local or a peer's, mapped here).
#[inline(always)]
pub unsafe fn bulk_prefetch_l2(src: u64, bytes: u32) {
    asm!("cp.async.bulk.prefetch.L2.global [{s}], {n};", s = in(reg64) src, n = in(reg32) bytes, options(nostack))
}

/// Order completed async-proxy writes to global memory (bulk stores) before this thread's later
/// generic-proxy accesses, such as the release store of a flag that announces them.
#[inline(always)]
pub fn fence_proxy_async_global() {
    unsafe { asm!("fence.proxy.async.global;", options(nostack)) }
}

/// Copy 16 bytes from global `src` to shared `dst` (`cp.async.cg`: through L2 only), of which
/// the first `valid` (0..=16) are read and the rest zero-filled. Completion is tracked by a
/// later [`cp_async_arrive_noinc`].
///
/// # Safety
/// `dst` is 16-byte aligned shared memory with room; `src` is 16-byte aligned and, when `valid`
/// is not 0, `valid` readable global bytes.
#[inline(always)]
pub unsafe fn cp_async_16_zfill(dst: u32, src: u64, valid: u32) {
    asm!("cp.async.cg.shared.global [{d}], [{s}], 16, {n};", d = in(reg32) dst, s = in(reg64) src,
         n = in(reg32) valid, options(nostack))
}

/// Make the mbarrier at `bar` count this thread's earlier `cp.async` copies: its arrival happens
/// when they have landed. `.noinc`: the arrival is one of those the barrier was initialised to
/// expect.
///
/// # Safety
/// `bar` is an initialised mbarrier in this CTA's shared memory whose count includes this arrival.
#[inline(always)]
pub unsafe fn cp_async_arrive_noinc(bar: u32) {
    asm!("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [{b}];", b = in(reg32) bar, options(nostack))
}
