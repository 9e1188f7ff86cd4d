//! The wgmma mainloop: where A and B k-blocks live in shared memory, how the producer loads one
//! (TMA, 128-byte swizzle), and how a consumer warpgroup multiplies it (m64n256k16 wgmma from
//! shared memory, both B layouts).
use crate::arch::*;
use crate::kernels_info::gemm::*;
use crate::pipeline::Pipeline;
use crate::tile::*;

const _: () = assert!(A_STAGE_BYTES % SW128_ATOM_BYTES == 0 && B_STAGE_BYTES % SW128_ATOM_BYTES == 0);

/// The compute CTA's dynamic shared memory with a ring of `STAGES` (see `kernels_info::gemm`):
/// A stages, B stages, the two consumer warpgroups' C staging tiles where they fit, then the
/// pipeline's barriers, scratch words and the epilogue handoff barriers.
#[derive(Clone, Copy)]
pub struct Smem<const STAGES: u32> {
    /// Shared-memory address of the dynamic shared memory (`dyn_smem_base`); the offsets of
    /// `kernels_info::gemm` are relative to it.
    pub base: u32,
}

impl<const STAGES: u32> Smem<STAGES> {
    /// Whether the layout has the consumers' C staging tiles ([`Smem::c`]).
    pub const HAS_C: bool = has_c_staging(STAGES);

    /// A of stage `s` (`TILE_M` rows of `TILE_K`, K-major, swizzled).
    #[inline(always)]
    pub const fn a(&self, s: u32) -> u32 {
        self.base + s * A_STAGE_BYTES
    }
    /// B of stage `s`.
    #[inline(always)]
    pub const fn b(&self, s: u32) -> u32 {
        self.base + b_off(STAGES) + s * B_STAGE_BYTES
    }
    /// Consumer warpgroup `wg`'s 64 x `TILE_N` output staging tile. Only with [`Smem::HAS_C`]:
    /// a ring without staging tiles has its barriers there.
    #[inline(always)]
    pub const fn c(&self, wg: u32) -> u32 {
        self.base + c_off(STAGES) + wg * C_WG_BYTES
    }
    /// The mainloop's pipeline.
    #[inline(always)]
    pub const fn pipeline(&self) -> Pipeline<STAGES> {
        Pipeline::at(self.base + bar_off(STAGES))
    }
    /// The scratch words (16 bytes).
    #[inline(always)]
    pub const fn scratch(&self) -> u32 {
        self.base + scratch_off(STAGES)
    }
    /// The epilogue handoff barriers.
    #[inline(always)]
    pub const fn handoff(&self) -> u32 {
        self.base + handoff_off(STAGES)
    }
}

/// Bytes one k-block stage brings in (what the full barrier expects).
pub const STAGE_TX_BYTES: u32 = A_STAGE_BYTES + B_STAGE_BYTES;

/// Producer: load k-block `kb` of the tile whose A rows start at row `m0` of `a_map` and whose
/// columns start at `n0`, into stage `slot`, completing on `full`. `TRANS_B` is 1 for B `[K, N]`,
/// 0 for B `[N, K]`. `b_row0` is added to B's row coordinate (K for `[K, N]`, N for `[N, K]`):
/// it selects one matrix of several stacked in one tensor map (a grouped GEMM's experts).
///
/// # Safety
/// The maps are valid tensor maps of A `[M, K]` and B; the slot is acquired and `full` expects
/// [`STAGE_TX_BYTES`].
#[inline(always)]
pub unsafe fn load_k_block<const TRANS_B: u32, const ST: u32>(
    smem: &Smem<ST>,
    a_map: u64,
    b_map: u64,
    slot: u32,
    full: u32,
    (m0, n0): (i32, i32),
    b_row0: i32,
    kb: u32,
) {
    let k0 = (kb * TILE_K) as i32;
    tma_load_2d(smem.a(slot), a_map, full, k0, m0);
    if TRANS_B == 0 {
        tma_load_2d(smem.b(slot), b_map, full, k0, n0 + b_row0);
    } else {
        // B [K, N]: four boxes of 64 N-columns x 64 K-rows.
        for j in 0..TILE_N / 64 {
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
pub unsafe fn mma_k_block<const TRANS_B: u32, const ST: u32>(
    acc: &mut [f32; 128],
    smem: &Smem<ST>,
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
        wgmma::mma_m64n256k16_bf16::<TRANS_B>(acc, da, db, accumulate);
    }
}
