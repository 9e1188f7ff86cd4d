//! Shared memory: the dynamic shared-memory window and raw 32-bit shared-space accesses.
use core::arch::{asm, global_asm};

// One dynamic shared-memory array for every kernel of the module, aligned for 128-byte swizzled
// TMA boxes (which need 1024-byte alignment).
global_asm!(".extern .shared .align 1024 .b8 mkernel_dyn_smem[];");

/// 32-bit shared-space address of the start of dynamic shared memory.
#[inline(always)]
pub fn dyn_smem_base() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, mkernel_dyn_smem;", r = out(reg32) r, options(pure, nomem, nostack)) };
    r
}

/// Generic pointer to the start of dynamic shared memory.
#[inline(always)]
pub fn dyn_smem_ptr() -> *mut u8 {
    let r: u64;
    unsafe { asm!("cvta.shared.u64 {r}, mkernel_dyn_smem;", r = out(reg64) r, options(pure, nomem, nostack)) };
    r as *mut u8
}

/// Convert a generic pointer into shared memory to its 32-bit shared-space address.
#[inline(always)]
pub fn cvta_to_shared<T>(p: *const T) -> u32 {
    let r: u64;
    unsafe {
        asm!("cvta.to.shared.u64 {r}, {p};", r = out(reg64) r, p = in(reg64) p as u64,
             options(pure, nomem, nostack))
    };
    r as u32
}

/// Store a 32-bit word at shared address `addr`.
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn st_shared_u32(addr: u32, v: u32) {
    asm!("st.shared.u32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack))
}

/// Store 16 bytes at shared address `addr`.
///
/// # Safety
/// `addr` must be a 16-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn st_shared_v4_u32(addr: u32, v: [u32; 4]) {
    asm!("st.shared.v4.u32 [{a}], {{{x}, {y}, {z}, {w}}};", a = in(reg32) addr,
         x = in(reg32) v[0], y = in(reg32) v[1], z = in(reg32) v[2], w = in(reg32) v[3],
         options(nostack))
}

/// Load a 32-bit word from shared address `addr`.
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_u32(addr: u32) -> u32 {
    let r: u32;
    asm!("ld.shared.u32 {r}, [{a}];", r = out(reg32) r, a = in(reg32) addr, options(nostack));
    r
}

/// Store a 64-bit word at shared address `addr`.
///
/// # Safety
/// `addr` must be an 8-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn st_shared_u64(addr: u32, v: u64) {
    asm!("st.shared.u64 [{a}], {v};", a = in(reg32) addr, v = in(reg64) v, options(nostack))
}

/// Load a 64-bit word from shared address `addr`.
///
/// # Safety
/// `addr` must be an 8-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_u64(addr: u32) -> u64 {
    let r: u64;
    asm!("ld.shared.u64 {r}, [{a}];", r = out(reg64) r, a = in(reg32) addr, options(nostack));
    r
}

/// Load 16 bytes from shared address `addr`.
///
/// # Safety
/// `addr` must be a 16-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn ld_shared_v4_u32(addr: u32) -> [u32; 4] {
    let (x, y, z, w): (u32, u32, u32, u32);
    asm!("ld.shared.v4.u32 {{{x}, {y}, {z}, {w}}}, [{a}];", a = in(reg32) addr,
         x = out(reg32) x, y = out(reg32) y, z = out(reg32) z, w = out(reg32) w,
         options(nostack));
    [x, y, z, w]
}

/// Atomic add on the 32-bit word at shared address `addr`; returns the previous value.
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn atom_add_shared_u32(addr: u32, v: u32) -> u32 {
    let r: u32;
    asm!("atom.shared.add.u32 {r}, [{a}], {v};", r = out(reg32) r, a = in(reg32) addr, v = in(reg32) v,
         options(nostack));
    r
}

/// Atomic or on the 32-bit word at shared address `addr`.
///
/// # Safety
/// `addr` must be a 4-byte aligned address inside this CTA's shared memory.
#[inline(always)]
pub unsafe fn red_or_shared_u32(addr: u32, v: u32) {
    asm!("red.shared.or.b32 [{a}], {v};", a = in(reg32) addr, v = in(reg32) v, options(nostack));
}
