//! Fast float math for softmax.
use core::arch::asm;

/// `2^x`, approximate (about 2 ulp), subnormals flushed to zero; `2^-inf = 0`.
#[inline(always)]
pub fn ex2_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

/// `log2(x)`, approximate, subnormals flushed to zero; `log2(0) = -inf`.
#[inline(always)]
pub fn lg2_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("lg2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

/// `1 / x`, approximate, subnormals flushed to zero.
#[inline(always)]
pub fn rcp_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("rcp.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}
