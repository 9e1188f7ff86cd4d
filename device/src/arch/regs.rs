//! Register reallocation between warpgroups (`setmaxnreg`, sm_90a).
//!
//! Takes effect only when the kernel has a register cap at entry: declare it with
//! [`crate::launch_bounds!`], which build.rs turns into `.maxntid` / `.minnctapersm`.
use core::arch::asm;

/// Raise this warpgroup's per-thread register budget to `N` (a multiple of 8, 24..=256).
#[inline(always)]
pub fn setmaxnreg_inc<const N: u32>() {
    unsafe { asm!("setmaxnreg.inc.sync.aligned.u32 {n};", n = const N, options(nomem, nostack)) }
}

/// Lower this warpgroup's per-thread register budget to `N` (a multiple of 8, 24..=256).
#[inline(always)]
pub fn setmaxnreg_dec<const N: u32>() {
    unsafe { asm!("setmaxnreg.dec.sync.aligned.u32 {n};", n = const N, options(nomem, nostack)) }
}

/// Declare a kernel's launch bounds. rustc cannot emit `.maxntid` / `.minnctapersm`, so this emits
/// a marker comment that build.rs rewrites into those directives on the enclosing `.entry`.
/// Call it once, at the top of the kernel.
#[macro_export]
macro_rules! launch_bounds {
    ($maxntid:literal, $minnctapersm:literal) => {
        unsafe {
            core::arch::asm!(
                concat!(
                    "// @mkernel.launch_bounds maxntid=",
                    stringify!($maxntid),
                    " minnctapersm=",
                    stringify!($minnctapersm)
                ),
                options(nomem, nostack, preserves_flags)
            )
        }
    };
}

/// `x`, hidden from the optimiser: values derived from it are computed where they are used
/// instead of being hoisted out of a loop and held in registers all along (how a mainloop keeps
/// its wgmma descriptors from eating the accumulators' registers).
#[inline(always)]
pub fn opaque_u32(x: u32) -> u32 {
    let r: u32;
    // Not `pure`: the optimiser must assume a side effect, so it neither hoists nor merges it.
    unsafe { core::arch::asm!("mov.b32 {r}, {x};", r = out(reg32) r, x = in(reg32) x, options(nomem, nostack)) };
    r
}
