//! Fast float math for softmax.
use core::arch::asm;

/// `2^x`, approximate (about 2 ulp), subnormals flushed to zero; `2^-inf = 0`.
#[inline(always)]
pub fn ex2_approx(x: f32) -> f32 {
    let r: f32;
    unsafe { asm!("ex2.approx.ftz.f32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(pure, nomem, nostack)) };
    r
}

/// `a * b + c` with one rounding (one FFMA: the compiler never fuses a separate multiply and add,
/// as Rust's float semantics forbid it).
#[inline(always)]
pub fn fma(a: f32, b: f32, c: f32) -> f32 {
    let r: f32;
    unsafe {
        asm!("fma.rn.f32 {r}, {a}, {b}, {c};", r = out(reg32) r, a = in(reg32) a, b = in(reg32) b, c = in(reg32) c,
             options(pure, nomem, nostack))
    };
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
