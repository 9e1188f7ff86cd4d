//! Warpgroup matrix multiply-accumulate (`wgmma`, sm_90a): one warpgroup (128 threads, 4
//! consecutive warps starting at a multiple of 4) computes a 64 x N x 16 product from shared-memory
//! operands described by 64-bit descriptors (see `crate::tile::SmemDesc`) into f32 registers.
//!
//! Accumulator layout of `d` for m64nNk16 (thread `t` of the warpgroup, warp `w = t / 32`,
//! lane `l`): element `d[4j + i]` is row `16w + l/4 + 8*(i/2)`, column `8j + 2*(l%4) + i%2`.
use core::arch::asm;

/// Order earlier register / shared-memory accesses before the next `wgmma.mma_async`.
#[inline(always)]
pub fn fence() {
    unsafe { asm!("wgmma.fence.sync.aligned;", options(nostack)) }
}

/// Close the current group of `mma_async` operations.
#[inline(always)]
pub fn commit_group() {
    unsafe { asm!("wgmma.commit_group.sync.aligned;", options(nostack)) }
}

/// Wait until at most `N` groups of `mma_async` are pending (their accumulators then readable).
#[inline(always)]
pub fn wait_group<const N: u32>() {
    unsafe { asm!("wgmma.wait_group.sync.aligned {n};", n = const N, options(nostack)) }
}

/// One `mma_async` per N used by the GEMM engine: `d (+)= A(64x16, smem) * B(16xN, smem)`,
/// bf16 inputs, f32 accumulators. `scale_d == 0` overwrites `d`; `TRANS_B == 1` reads B as
/// N-major (a `[K, N]` row-major tile), `0` as K-major (a `[N, K]` row-major tile).
macro_rules! mma_bf16 {
    ($(#[$m:meta])* $name:ident, $n:literal, [$($i:literal),*]) => {
        $(#[$m])*
        ///
        /// # Safety
        /// All 128 threads of the warpgroup call it together after [`fence`]; the descriptors
        /// describe initialised shared memory laid out as they say; `d` is not read or written
        /// until a [`wait_group`] covering this operation returns.
        #[inline(always)]
        pub unsafe fn $name<const TRANS_B: u32>(d: &mut [f32; $n / 2], desc_a: u64, desc_b: u64, scale_d: u32) {
            asm!(
                concat!(
                    "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n",
                    stringify!($n), "k16.f32.bf16.bf16 {{{0}" $(, ", {", stringify!($i), "}")*,
                    "}}, {da}, {db}, p, 1, 1, 0, {tb}; }}"
                ),
                inout(reg32) d[0], $(inout(reg32) d[$i],)*
                da = in(reg64) desc_a, db = in(reg64) desc_b, sd = in(reg32) scale_d,
                tb = const TRANS_B, options(nostack)
            )
        }
    };
}

mma_bf16!(/// m64n64k16 bf16 -> f32 (32 accumulators per thread).
    mma_m64n64k16_bf16, 64, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
mma_bf16!(/// m64n128k16 bf16 -> f32 (64 accumulators per thread).
    mma_m64n128k16_bf16, 128, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]);
mma_bf16!(/// m64n192k16 bf16 -> f32 (96 accumulators per thread).
    mma_m64n192k16_bf16, 192, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95]);
mma_bf16!(/// m64n224k16 bf16 -> f32 (112 accumulators per thread).
    mma_m64n224k16_bf16, 224, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111]);
mma_bf16!(/// m64n256k16 bf16 -> f32 (128 accumulators per thread).
    mma_m64n256k16_bf16, 256, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63, 64, 65, 66, 67, 68, 69, 70, 71, 72, 73, 74, 75, 76, 77, 78, 79, 80, 81, 82, 83, 84, 85, 86, 87, 88, 89, 90, 91, 92, 93, 94, 95, 96, 97, 98, 99, 100, 101, 102, 103, 104, 105, 106, 107, 108, 109, 110, 111, 112, 113, 114, 115, 116, 117, 118, 119, 120, 121, 122, 123, 124, 125, 126, 127]);

/// One `mma_async` with A from registers: `d (+)= A(64x16, registers) * B(16xN, smem)`, bf16
/// inputs, f32 accumulators. `a` is the thread's A fragment: four words of two bf16 each, laid
/// out as the accumulator of an m64n16 product (so a product's accumulators, rounded in pairs with
/// `pack_bf16x2`, feed the next wgmma directly: `a[0]` = `d[8kk..+2]`, `a[1]` = `d[8kk+2..+4]`,
/// `a[2]` = `d[8kk+4..+6]`, `a[3]` = `d[8kk+6..+8]` for k-slice `kk`).
macro_rules! mma_bf16_rs {
    ($(#[$m:meta])* $name:ident, $n:literal, [$($i:literal),*]) => {
        $(#[$m])*
        ///
        /// # Safety
        /// All 128 threads of the warpgroup call it together after [`fence`]; the B descriptor
        /// describes initialised shared memory laid out as it says; `d` is not read or written
        /// until a [`wait_group`] covering this operation returns.
        #[inline(always)]
        pub unsafe fn $name<const TRANS_B: u32>(d: &mut [f32; $n / 2], a: &[u32; 4], desc_b: u64, scale_d: u32) {
            asm!(
                concat!(
                    "{{ .reg .pred p; setp.ne.b32 p, {sd}, 0; wgmma.mma_async.sync.aligned.m64n",
                    stringify!($n), "k16.f32.bf16.bf16 {{{0}" $(, ", {", stringify!($i), "}")*,
                    "}}, {{{a0}, {a1}, {a2}, {a3}}}, {db}, p, 1, 1, {tb}; }}"
                ),
                inout(reg32) d[0], $(inout(reg32) d[$i],)*
                a0 = in(reg32) a[0], a1 = in(reg32) a[1], a2 = in(reg32) a[2], a3 = in(reg32) a[3],
                db = in(reg64) desc_b, sd = in(reg32) scale_d, tb = const TRANS_B, options(nostack)
            )
        }
    };
}

mma_bf16_rs!(/// m64n64k16 bf16 -> f32, A from registers.
    mma_m64n64k16_bf16_rs, 64, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31]);
mma_bf16_rs!(/// m64n128k16 bf16 -> f32, A from registers.
    mma_m64n128k16_bf16_rs, 128, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 52, 53, 54, 55, 56, 57, 58, 59, 60, 61, 62, 63]);
