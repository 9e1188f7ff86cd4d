//! The wgmma mainloop: where A and B k-blocks live in shared memory, how the producer loads one
//! (TMA, 128-byte swizzle), and how a consumer warpgroup multiplies it (m64nNk16 wgmma from
//! shared memory, both B layouts). The tile width N (64, 128, 192, 224 or 256 columns) is the
//! type of the consumers' accumulators ([`Accumulators`]): the shared-memory layout, the loads,
//! the wgmma and the epilogues all follow from it.
use crate::arch::*;
use crate::kernels_info::gemm::*;
use crate::pipeline::Pipeline;
use crate::tile::*;
use core::ops::IndexMut;

/// One consumer thread's accumulators of a 64 x `N` wgmma (`N / 2` f32 in the layout of
/// `arch::wgmma`), which fixes the engine's tile width: `[f32; 32]` for 64 columns, `[f32; 64]`
/// for 128, `[f32; 96]` for 192, `[f32; 112]` for 224, `[f32; 128]` for 256. Code over them
/// indexes with constants only (unrolled, chunks past [`Accumulators::CHUNKS`] skipped at compile
/// time), so they stay in registers.
pub trait Accumulators: Copy + IndexMut<usize, Output = f32> {
    /// Tile columns: the wgmma N.
    const N: u32;
    /// 16-byte chunks (four accumulators) per thread: `N / 8`.
    const CHUNKS: u32 = Self::N / 8;
    /// Every accumulator 0.
    const ZERO: Self;
    /// `self (+)= A(64 x 16) @ B(16 x N)` from the shared-memory descriptors (see
    /// `arch::wgmma`); `scale_d == 0` overwrites.
    ///
    /// # Safety
    /// As for `arch::wgmma`'s `mma_*`: the whole warpgroup after `wgmma::fence`, descriptors of
    /// initialised shared memory, accumulators untouched until a covering `wait_group`.
    unsafe fn mma<const TRANS_B: u32>(&mut self, desc_a: u64, desc_b: u64, scale_d: u32);
}

/// Accumulators of a 64-column tile.
pub type Acc64 = [f32; 32];
/// Accumulators of a 128-column tile.
pub type Acc128 = [f32; 64];
/// Accumulators of a 192-column tile (8192 = 43 tiles a row, less 64 columns: three tile rows
/// make 129 tiles, one wave on 132 SMs, where 256-column tiles make 96 and leave 36 idle).
pub type Acc192 = [f32; 96];
/// Accumulators of a 224-column tile (28672 = 128 x 224 columns make 128 tiles a row, one
/// per SM, where 256-column tiles make 112 and 224-row waves leave SMs idle).
pub type Acc224 = [f32; 112];
/// Accumulators of a 256-column tile ([`TILE_N`]: the fused kernels and the compute-bound GEMM).
pub type Acc256 = [f32; 128];

macro_rules! accumulators {
    ($acc:ty, $n:literal, $mma:ident) => {
        impl Accumulators for $acc {
            const N: u32 = $n;
            const ZERO: Self = [0.0; $n / 2];
            #[inline(always)]
            unsafe fn mma<const TRANS_B: u32>(&mut self, desc_a: u64, desc_b: u64, scale_d: u32) {
                wgmma::$mma::<TRANS_B>(self, desc_a, desc_b, scale_d);
            }
        }
    };
}
accumulators!(Acc64, 64, mma_m64n64k16_bf16);
accumulators!(Acc128, 128, mma_m64n128k16_bf16);
accumulators!(Acc192, 192, mma_m64n192k16_bf16);
accumulators!(Acc224, 224, mma_m64n224k16_bf16);
accumulators!(Acc256, 256, mma_m64n256k16_bf16);
const _: () = assert!(<Acc256 as Accumulators>::N == TILE_N);

/// The compute CTA's dynamic shared memory with a ring of `STAGES` and tiles as wide as `A`
/// says (see `kernels_info::gemm`): A stages, B stages, the two consumer warpgroups' C staging
/// tiles where they fit, then the pipeline's barriers, scratch words and the epilogue handoff
/// barriers.
#[derive(Clone, Copy)]
pub struct Smem<const STAGES: u32, A: Accumulators = Acc256> {
    /// Shared-memory address of the dynamic shared memory (`dyn_smem_base`); the offsets of
    /// `kernels_info::gemm` are relative to it.
    pub base: u32,
    _acc: core::marker::PhantomData<A>,
}

impl<const STAGES: u32, A: Accumulators> Smem<STAGES, A> {
    /// Whether the layout has the consumers' C staging tiles ([`Smem::c`]).
    pub const HAS_C: bool = has_c_staging(STAGES, A::N);
    /// The layout at shared address `base` (1024-byte aligned).
    #[inline(always)]
    pub const fn at(base: u32) -> Self {
        Self { base, _acc: core::marker::PhantomData }
    }
    /// A of stage `s` (`TILE_M` rows of `TILE_K`, K-major, swizzled).
    #[inline(always)]
    pub const fn a(&self, s: u32) -> u32 {
        self.base + s * A_STAGE_BYTES
    }
    /// B of stage `s`.
    #[inline(always)]
    pub const fn b(&self, s: u32) -> u32 {
        self.base + b_off(STAGES) + s * b_stage_bytes(A::N)
    }
    /// Consumer warpgroup `wg`'s 64 x `N` output staging tile. Only with [`Smem::HAS_C`]:
    /// a ring without staging tiles has its barriers there.
    #[inline(always)]
    pub const fn c(&self, wg: u32) -> u32 {
        self.base + c_off(STAGES, A::N) + wg * c_wg_bytes(A::N)
    }
    /// The mainloop's pipeline.
    #[inline(always)]
    pub const fn pipeline(&self) -> Pipeline<STAGES> {
        Pipeline::at(self.base + bar_off(STAGES, A::N))
    }
    /// The scratch words (16 bytes).
    #[inline(always)]
    pub const fn scratch(&self) -> u32 {
        self.base + scratch_off(STAGES, A::N)
    }
    /// The epilogue handoff barriers.
    #[inline(always)]
    pub const fn handoff(&self) -> u32 {
        self.base + handoff_off(STAGES, A::N)
    }
    /// The side threads' shared memory (`kernels_info::gemm::side_off`, `SIDE_BYTES` long),
    /// past everything else: only a launch with `SIDE_SMEM_BYTES` has it.
    #[inline(always)]
    pub const fn side(&self) -> u32 {
        self.base + side_off(STAGES, A::N)
    }
    /// The ring of claimed tiles (a dynamic walk's, `feed`).
    #[inline(always)]
    pub const fn tile_ring(&self) -> u32 {
        self.base + tile_ring_off(STAGES, A::N)
    }
}

/// Producer: load k-block `kb` of the tile whose A rows start at row `m0` of `a_map` and whose
/// columns start at `n0`, into stage `slot`, completing on `full`. `TRANS_B` is 1 for B `[K, N]`,
/// 0 for B `[N, K]`. `b_row0` is added to B's row coordinate (K for `[K, N]`, N for `[N, K]`):
/// it selects one matrix of several stacked in one tensor map (a grouped GEMM's experts).
///
/// # Safety
/// The maps are valid tensor maps of A `[M, K]` (boxes of `a_rows` rows) and B; the slot is
/// acquired and `full` expects `stage_tx_bytes(a_rows, A::N, TRANS_B == 1)`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn load_k_block<const TRANS_B: u32, const ST: u32, A: Accumulators>(
    smem: &Smem<ST, A>,
    a_map: u64,
    b_map: u64,
    slot: u32,
    full: u32,
    (m0, n0): (i32, i32),
    b_row0: i32,
    kb: u32,
) {
    tma_load_2d(smem.a(slot), a_map, full, (kb * TILE_K) as i32, m0);
    load_b_k_block::<TRANS_B, ST, A>(smem, b_map, slot, full, n0, b_row0, kb);
}

/// Producer: the B half of [`load_k_block`] (a producer that gathers A's rows itself).
///
/// # Safety
/// As for [`load_k_block`], with `full` expecting B's bytes of the stage.
#[inline(always)]
pub unsafe fn load_b_k_block<const TRANS_B: u32, const ST: u32, A: Accumulators>(
    smem: &Smem<ST, A>,
    b_map: u64,
    slot: u32,
    full: u32,
    n0: i32,
    b_row0: i32,
    kb: u32,
) {
    let k0 = (kb * TILE_K) as i32;
    if TRANS_B == 0 {
        tma_load_2d(smem.b(slot), b_map, full, k0, n0 + b_row0);
    } else {
        // B [K, N]: boxes of 64 N-columns x 64 K-rows (four at 256 columns; at 224 the last
        // one is loaded whole and its right half never read: the wgmma stops at N).
        for j in 0..kn_boxes(A::N) {
            tma_load_2d(smem.b(slot) + j * 64 * SW128_ROW_BYTES, b_map, full, n0 + (64 * j) as i32, k0 + b_row0);
        }
    }
}

/// Consumer warpgroup `cwg`: `acc (+)= A[cwg's 64 rows] @ B` over the k-block in stage `slot`.
/// The tile's first k-block overwrites the accumulators (scale-d = 0): zeroing them with ordinary
/// moves would sit inside the wgmma pipeline and make ptxas serialise it.
///
/// # Safety
/// All 128 threads of the warpgroup call it together after `wgmma::fence`; the stage holds data.
#[inline(always)]
pub unsafe fn mma_k_block<const TRANS_B: u32, const ST: u32, A: Accumulators>(
    acc: &mut A,
    smem: &Smem<ST, A>,
    slot: u32,
    cwg: u32,
    first: bool,
) {
    let a = smem.a(slot) + cwg * 64 * SW128_ROW_BYTES;
    let b = smem.b(slot);
    for ks in 0..TILE_K / 16 {
        let da = SmemDesc::k_major(a).advance(ks * K16_STEP_K_MAJOR).0;
        let db = if TRANS_B == 0 {
            SmemDesc::k_major(b).advance(ks * K16_STEP_K_MAJOR).0
        } else {
            SmemDesc::mn_major(b, 64 * SW128_ROW_BYTES).advance(ks * K16_STEP_MN_MAJOR).0
        };
        let accumulate = (!first || ks > 0) as u32;
        acc.mma::<TRANS_B>(da, db, accumulate);
    }
}
