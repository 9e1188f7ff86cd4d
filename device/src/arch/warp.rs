//! Warp-level shuffles, votes and election.
use core::arch::asm;

/// All lanes.
pub const FULL_MASK: u32 = 0xffff_ffff;

/// Read `v` from lane `src` (`shfl.sync.idx`).
#[inline(always)]
pub fn shfl_idx(v: u32, src: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 31, {m};", r = out(reg32) r, v = in(reg32) v,
             s = in(reg32) src, m = in(reg32) FULL_MASK, options(nostack))
    };
    r
}

/// Read `v` from lane `lane ^ mask` (`shfl.sync.bfly`), the butterfly used by reductions.
#[inline(always)]
pub fn shfl_xor(v: u32, mask: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.bfly.b32 {r}, {v}, {s}, 31, {m};", r = out(reg32) r, v = in(reg32) v,
             s = in(reg32) mask, m = in(reg32) FULL_MASK, options(nostack))
    };
    r
}

/// Bit `i` set where lane `i` has `pred` true.
#[inline(always)]
pub fn ballot(pred: bool) -> u32 {
    let r: u32;
    unsafe {
        asm!("{{ .reg .pred p; setp.ne.u32 p, {v}, 0; vote.sync.ballot.b32 {r}, p, {m}; }}",
             r = out(reg32) r, v = in(reg32) pred as u32, m = in(reg32) FULL_MASK, options(nostack))
    };
    r
}

/// True in every lane when `pred` holds in all lanes.
#[inline(always)]
pub fn vote_all(pred: bool) -> bool {
    let r: u32;
    unsafe {
        asm!("{{ .reg .pred p, q; setp.ne.u32 p, {v}, 0; vote.sync.all.pred q, p, {m}; selp.u32 {r}, 1, 0, q; }}",
             r = out(reg32) r, v = in(reg32) pred as u32, m = in(reg32) FULL_MASK, options(nostack))
    };
    r != 0
}

/// `elect.sync`: true in exactly one lane of the (fully active) warp.
#[inline(always)]
pub fn elect_one() -> bool {
    let r: u32;
    unsafe {
        asm!("{{ .reg .pred p; .reg .b32 l; elect.sync l|p, {m}; selp.u32 {r}, 1, 0, p; }}",
             r = out(reg32) r, m = in(reg32) FULL_MASK, options(nostack))
    };
    r != 0
}

/// Wait until all lanes of the warp reach this point (`bar.warp.sync`).
#[inline(always)]
pub fn sync_warp() {
    unsafe { asm!("bar.warp.sync {m};", m = in(reg32) FULL_MASK, options(nostack)) }
}

/// The lanes of the warp executing this instruction together (`activemask.b32`).
#[inline(always)]
pub fn active_mask() -> u32 {
    let r: u32;
    unsafe { asm!("activemask.b32 {r};", r = out(reg32) r, options(nostack)) };
    r
}

/// Read `v` from lane `src` among the lanes of `mask`, which all execute this call
/// (`shfl.sync.idx` with a partial mask).
#[inline(always)]
pub fn shfl_idx_in(mask: u32, v: u32, src: u32) -> u32 {
    let r: u32;
    unsafe {
        asm!("shfl.sync.idx.b32 {r}, {v}, {s}, 31, {m};", r = out(reg32) r, v = in(reg32) v,
             s = in(reg32) src, m = in(reg32) mask, options(nostack))
    };
    r
}
