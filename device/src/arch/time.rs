//! Clocks and sleeping.
use core::arch::asm;

/// Nanoseconds from the GPU's global timer (`%globaltimer`; ticks coarsely, about 1 us on Hopper).
#[inline(always)]
pub fn globaltimer_ns() -> u64 {
    let r: u64;
    unsafe { asm!("mov.u64 {r}, %globaltimer;", r = out(reg64) r, options(nomem, nostack)) };
    r
}

/// This SM's cycle counter (`%clock64`).
#[inline(always)]
pub fn clock64() -> u64 {
    let r: u64;
    unsafe { asm!("mov.u64 {r}, %clock64;", r = out(reg64) r, options(nomem, nostack)) };
    r
}

/// Suspend the thread for about `ns` nanoseconds (`nanosleep`, at most 1 ms).
#[inline(always)]
pub fn nanosleep(ns: u32) {
    unsafe { asm!("nanosleep.u32 {t};", t = in(reg32) ns, options(nomem, nostack)) }
}
