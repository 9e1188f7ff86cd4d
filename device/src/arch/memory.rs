//! Memory-model operations: acquire loads, release stores, fences and atomics at CTA, GPU and
//! system scope. Pointers are generic addresses (device memory, peer memory or host-mapped memory).
//!
//! System scope (`sys`) is what a flag shared with the host or a peer GPU needs; GPU scope is
//! enough between CTAs of one device.
use core::arch::asm;

macro_rules! ld_acquire {
    ($(#[$m:meta])* $name:ident, $ty:ty, $cls:ident, $inst:literal) => {
        $(#[$m])*
        ///
        /// # Safety
        /// `p` must be valid and aligned for the access.
        #[inline(always)]
        pub unsafe fn $name(p: *const $ty) -> $ty {
            let r: $ty;
            asm!(concat!($inst, " {r}, [{p}];"), r = out($cls) r, p = in(reg64) p, options(nostack));
            r
        }
    };
}

macro_rules! st_release {
    ($(#[$m:meta])* $name:ident, $ty:ty, $cls:ident, $inst:literal) => {
        $(#[$m])*
        ///
        /// # Safety
        /// `p` must be valid and aligned for the access.
        #[inline(always)]
        pub unsafe fn $name(p: *mut $ty, v: $ty) {
            asm!(concat!($inst, " [{p}], {v};"), p = in(reg64) p, v = in($cls) v, options(nostack));
        }
    };
}

ld_acquire!(/// Load with acquire semantics at system scope.
    ld_acquire_sys_u32, u32, reg32, "ld.acquire.sys.u32");
ld_acquire!(/// Load with acquire semantics at system scope.
    ld_acquire_sys_u64, u64, reg64, "ld.acquire.sys.u64");
ld_acquire!(/// Load with acquire semantics at GPU scope.
    ld_acquire_gpu_u32, u32, reg32, "ld.acquire.gpu.u32");
ld_acquire!(/// Load with acquire semantics at GPU scope.
    ld_acquire_gpu_u64, u64, reg64, "ld.acquire.gpu.u64");
ld_acquire!(/// Load with acquire semantics at CTA scope.
    ld_acquire_cta_u32, u32, reg32, "ld.acquire.cta.u32");
ld_acquire!(/// Relaxed (but not cached stale) load at system scope: for polling without ordering.
    ld_relaxed_sys_u32, u32, reg32, "ld.relaxed.sys.u32");
ld_acquire!(/// Relaxed load at system scope.
    ld_relaxed_sys_u64, u64, reg64, "ld.relaxed.sys.u64");
ld_acquire!(/// Relaxed load at GPU scope.
    ld_relaxed_gpu_u32, u32, reg32, "ld.relaxed.gpu.u32");
ld_acquire!(/// Relaxed load at GPU scope.
    ld_relaxed_gpu_u64, u64, reg64, "ld.relaxed.gpu.u64");

ld_acquire!(/// Relaxed load of an `f32` at GPU scope.
    ld_relaxed_gpu_f32, f32, reg32, "ld.relaxed.gpu.f32");

/// Relaxed 8-byte load of two `f32` at GPU scope (`ld.relaxed.gpu.global.v2.f32`): data another
/// CTA wrote and published through a flag this CTA acquired. Strong, so never a stale L1 line,
/// and unlike a volatile access several can be in flight at once.
///
/// # Safety
/// `p` must be 8-byte aligned global memory.
#[inline(always)]
pub unsafe fn ld_relaxed_gpu_v2_f32(p: *const [f32; 2]) -> [f32; 2] {
    let (a, b): (f32, f32);
    asm!("ld.relaxed.gpu.global.v2.f32 {{{a}, {b}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
         p = in(reg64) p, options(nostack, readonly));
    [a, b]
}

st_release!(/// Store with release semantics at system scope: earlier writes are visible first.
    st_release_sys_u32, u32, reg32, "st.release.sys.u32");
st_release!(/// Store with release semantics at system scope.
    st_release_sys_u64, u64, reg64, "st.release.sys.u64");
st_release!(/// Store with release semantics at GPU scope.
    st_release_gpu_u32, u32, reg32, "st.release.gpu.u32");
st_release!(/// Store with release semantics at GPU scope.
    st_release_gpu_u64, u64, reg64, "st.release.gpu.u64");
st_release!(/// Store with release semantics at CTA scope.
    st_release_cta_u32, u32, reg32, "st.release.cta.u32");
st_release!(/// Relaxed store at system scope.
    st_relaxed_sys_u32, u32, reg32, "st.relaxed.sys.u32");
st_release!(/// Relaxed store at system scope.
    st_relaxed_sys_u64, u64, reg64, "st.relaxed.sys.u64");
st_release!(/// Relaxed store at GPU scope.
    st_relaxed_gpu_u32, u32, reg32, "st.relaxed.gpu.u32");

macro_rules! atom {
    ($(#[$m:meta])* $name:ident, $ty:ty, $cls:ident, $inst:literal) => {
        $(#[$m])*
        /// Returns the previous value.
        ///
        /// # Safety
        /// `p` must be valid and aligned for the access.
        #[inline(always)]
        pub unsafe fn $name(p: *mut $ty, v: $ty) -> $ty {
            let r: $ty;
            asm!(concat!($inst, " {r}, [{p}], {v};"), r = out($cls) r, p = in(reg64) p,
                 v = in($cls) v, options(nostack));
            r
        }
    };
}

atom!(/// Atomic add, relaxed, GPU scope.
    atom_add_relaxed_gpu_u32, u32, reg32, "atom.relaxed.gpu.add.u32");
atom!(/// Atomic add, relaxed, GPU scope.
    atom_add_relaxed_gpu_u64, u64, reg64, "atom.relaxed.gpu.add.u64");
atom!(/// Atomic add, acquire-release, GPU scope.
    atom_add_acq_rel_gpu_u32, u32, reg32, "atom.acq_rel.gpu.add.u32");
atom!(/// Atomic add, relaxed, system scope.
    atom_add_relaxed_sys_u64, u64, reg64, "atom.relaxed.sys.add.u64");
atom!(/// Atomic add, acquire-release, system scope.
    atom_add_acq_rel_sys_u32, u32, reg32, "atom.acq_rel.sys.add.u32");
atom!(/// Atomic exchange, acquire-release, system scope.
    atom_exch_acq_rel_sys_u32, u32, reg32, "atom.acq_rel.sys.exch.b32");

/// Atomic compare-and-swap, acquire-release, system scope. Returns the previous value.
///
/// # Safety
/// `p` must be valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn atom_cas_acq_rel_sys_u32(p: *mut u32, expected: u32, new: u32) -> u32 {
    let r: u32;
    asm!("atom.acq_rel.sys.cas.b32 {r}, [{p}], {e}, {n};", r = out(reg32) r, p = in(reg64) p,
         e = in(reg32) expected, n = in(reg32) new, options(nostack));
    r
}

/// Atomic compare-and-swap, relaxed, GPU scope. Returns the previous value (the swap happened
/// when it equals `expected`).
///
/// # Safety
/// `p` must be valid and 8-byte aligned.
#[inline(always)]
pub unsafe fn atom_cas_relaxed_gpu_u64(p: *mut u64, expected: u64, new: u64) -> u64 {
    let r: u64;
    asm!("atom.relaxed.gpu.cas.b64 {r}, [{p}], {e}, {n};", r = out(reg64) r, p = in(reg64) p,
         e = in(reg64) expected, n = in(reg64) new, options(nostack));
    r
}

/// `fence.acq_rel.cta`
#[inline(always)]
pub fn fence_acq_rel_cta() {
    unsafe { asm!("fence.acq_rel.cta;", options(nostack)) }
}

/// `fence.acq_rel.gpu` (`__threadfence()`)
#[inline(always)]
pub fn fence_acq_rel_gpu() {
    unsafe { asm!("fence.acq_rel.gpu;", options(nostack)) }
}

/// `fence.acq_rel.sys` (`__threadfence_system()`)
#[inline(always)]
pub fn fence_acq_rel_sys() {
    unsafe { asm!("fence.acq_rel.sys;", options(nostack)) }
}

/// `fence.sc.sys`: sequentially consistent fence at system scope.
#[inline(always)]
pub fn fence_sc_sys() {
    unsafe { asm!("fence.sc.sys;", options(nostack)) }
}

/// 16-byte coherent load from global memory (`ld.global.v4.u32`): for data another agent wrote
/// during this kernel (the non-coherent path may return stale lines).
///
/// # Safety
/// `p` must be valid and 16-byte aligned.
#[inline(always)]
pub unsafe fn ld_global_v4_u32(p: *const [u32; 4]) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("ld.global.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
         c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(nostack, readonly));
    [a, b, c, d]
}

/// 16-byte global load through the read-only (non-coherent) path.
///
/// # Safety
/// `p` must be 16-byte aligned global memory that nothing writes during the kernel.
#[inline(always)]
pub unsafe fn ld_global_nc_v4_u32(p: *const [u32; 4]) -> [u32; 4] {
    let (a, b, c, d): (u32, u32, u32, u32);
    asm!("ld.global.nc.v4.u32 {{{a}, {b}, {c}, {d}}}, [{p}];", a = out(reg32) a, b = out(reg32) b,
         c = out(reg32) c, d = out(reg32) d, p = in(reg64) p, options(nostack, readonly));
    [a, b, c, d]
}

/// 16-byte global store.
///
/// # Safety
/// `p` must be 16-byte aligned, writable global memory.
#[inline(always)]
pub unsafe fn st_global_v4_u32(p: *mut [u32; 4], v: [u32; 4]) {
    asm!("st.global.v4.u32 [{p}], {{{a}, {b}, {c}, {d}}};", p = in(reg64) p, a = in(reg32) v[0],
         b = in(reg32) v[1], c = in(reg32) v[2], d = in(reg32) v[3], options(nostack));
}

/// Round two f32 to bf16 (nearest even) and pack them: `lo` in bits 0..16, `hi` in 16..32.
#[inline(always)]
pub fn pack_bf16x2(lo: f32, hi: f32) -> u32 {
    let r: u32;
    unsafe {
        asm!("cvt.rn.bf16x2.f32 {r}, {h}, {l};", r = out(reg32) r, h = in(reg32) hi, l = in(reg32) lo,
             options(pure, nomem, nostack))
    };
    r
}

/// The two bf16 halves of a word packed by [`pack_bf16x2`], widened to f32 (exact).
#[inline(always)]
pub fn unpack_bf16x2(w: u32) -> (f32, f32) {
    (f32::from_bits(w << 16), f32::from_bits(w & 0xffff_0000))
}

/// Atomic maximum, acquire-release, GPU scope. Returns the previous value.
///
/// # Safety
/// `p` must be valid and 8-byte aligned.
#[inline(always)]
pub unsafe fn atom_max_acq_rel_gpu_u64(p: *mut u64, v: u64) -> u64 {
    let r: u64;
    asm!("atom.acq_rel.gpu.max.u64 {r}, [{p}], {v};", r = out(reg64) r, p = in(reg64) p, v = in(reg64) v, options(nostack));
    r
}

/// 16-byte global store of two u64 (weak; order it with a later release).
///
/// # Safety
/// `p` must be 16-byte aligned, writable global (or host-mapped) memory.
#[inline(always)]
pub unsafe fn st_global_v2_u64(p: *mut u64, v: [u64; 2]) {
    asm!("st.global.v2.u64 [{p}], {{{a}, {b}}};", p = in(reg64) p, a = in(reg64) v[0], b = in(reg64) v[1], options(nostack));
}

/// 8-byte global store (weak).
///
/// # Safety
/// `p` must be 8-byte aligned, writable global (or host-mapped) memory.
#[inline(always)]
pub unsafe fn st_global_u64(p: *mut u64, v: u64) {
    asm!("st.global.u64 [{p}], {v};", p = in(reg64) p, v = in(reg64) v, options(nostack));
}

/// Atomic add without a result, relaxed, GPU scope (order it with an earlier release fence).
///
/// # Safety
/// `p` must be valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn red_add_relaxed_gpu_u32(p: *mut u32, v: u32) {
    asm!("red.relaxed.gpu.global.add.u32 [{p}], {v};", p = in(reg64) p, v = in(reg32) v, options(nostack));
}

/// Atomic compare-and-swap, relaxed, GPU scope. Returns the previous value.
///
/// # Safety
/// `p` must be valid and 4-byte aligned.
#[inline(always)]
pub unsafe fn atom_cas_relaxed_gpu_u32(p: *mut u32, expected: u32, new: u32) -> u32 {
    let r: u32;
    asm!("atom.relaxed.gpu.cas.b32 {r}, [{p}], {e}, {n};", r = out(reg32) r, p = in(reg64) p,
         e = in(reg32) expected, n = in(reg32) new, options(nostack));
    r
}
