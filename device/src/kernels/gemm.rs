//! The plain GEMM `C = A @ B` (bf16 in, f32 accumulate, bf16 or f32 out): the framework's engine
//! with the grouped-raster scheduler and the local-store epilogue, one CTA per SM, on the staged
//! ring (compute-bound shapes) or the deep one (few rows: bound by reading B); and its split-K
//! and stream-K forms for shapes with too few output tiles to fill the GPU (the `SplitK` /
//! `StreamK` schedulers and the `SplitKStore` epilogue around the same local store), which are
//! memory-bound by construction and run deep.
use crate::abi::*;
use crate::arch::*;
use crate::comm::signal::launch_epoch;
use crate::gemm::engine::Operands;
use crate::gemm::*;
use crate::sched::{GroupedRaster, KSplit, NoGate, Role, SplitK, StreamK, TileGrid, TileScheduler};
use crate::sync::Bound;

/// The plain GEMM's pieces for the parameter block `p`.
#[inline(always)]
pub fn parts(p: &GemmParams) -> (Operands, GroupedRaster, StoreC) {
    (
        Operands { a_map: p.a_map, b_map: p.b_map, k: p.k },
        GroupedRaster(TileGrid::new(p.m, p.n, TILE_M, TILE_N, p.group_m)),
        StoreC { c_map: p.c_map, c: p.c, m: p.m, n: p.n, out_f32: p.out_f32 != 0 },
    )
}

/// The plain GEMM on a ring of `STAGES`.
#[inline(always)]
unsafe fn gemm_ring<const TRANS_B: u32, const STAGES: u32>(p: &GemmParams) {
    let cta = block_idx_x();
    if cta >= p.roles.compute {
        return;
    }
    let (ops, sched, epi) = parts(p);
    let b = Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: 0, role: Role::Compute as u32 };
    compute_cta::<TRANS_B, STAGES, _, _, _>(&ops, &sched, &NoGate, &epi, p.roles.compute, b);
}

#[inline(always)]
unsafe fn gemm<const TRANS_B: u32>(p: &GemmParams) {
    gemm_ring::<TRANS_B, STAGES>(p);
}

#[inline(always)]
unsafe fn gemm_deep<const TRANS_B: u32>(p: &GemmParams) {
    gemm_ring::<TRANS_B, DEEP_STAGES>(p);
}

/// The split-K and stream-K GEMMs' common body: the epoch, then the engine (deep ring) with
/// scheduler `sched` and the summing epilogue around the local store.
#[inline(always)]
unsafe fn gemm_split<const TRANS_B: u32, K: KSplit + TileScheduler>(p: &SplitKParams, sched: impl Fn(TileGrid) -> K) {
    let g = &p.gemm;
    if block_idx_x() >= g.roles.compute {
        return;
    }
    let scratch = dyn_smem_base() + scratch_off(DEEP_STAGES);
    if thread_idx_x() == 0 {
        st_shared_u32(scratch, launch_epoch(p.launches as *mut u64, g.roles.compute));
    }
    sync_threads();
    let (ops, GroupedRaster(grid), store) = parts(g);
    let bound = Bound { timeout_ns: g.timeout_ns, diag: &g.diag, rank: 0, role: Role::Compute as u32 };
    let epi = SplitKStore {
        inner: store,
        sched: sched(grid),
        workspace: p.workspace,
        counters: p.counters,
        parallel: p.parallel != 0,
        epoch: ld_shared_u32(scratch),
        bound,
    };
    compute_cta::<TRANS_B, DEEP_STAGES, _, _, _>(&ops, &epi.sched, &NoGate, &epi, g.roles.compute, bound);
}

#[inline(always)]
unsafe fn gemm_splitk<const TRANS_B: u32>(p: &SplitKParams) {
    gemm_split::<TRANS_B, _>(p, |grid| SplitK { grid, splits: p.splits });
}

#[inline(always)]
unsafe fn gemm_streamk<const TRANS_B: u32>(p: &SplitKParams) {
    let k_blocks = p.gemm.k.div_ceil(TILE_K);
    gemm_split::<TRANS_B, _>(p, |grid| StreamK::new(grid, k_blocks, p.gemm.roles.compute));
}

b_layout_entry_points! {
    SplitKParams => gemm_streamk;
    /// Stream-K GEMM (fewer tiles than SMs, too many to split evenly) with B `[K, N]`.
    kn: mk_gemm_streamk_kn;
    /// Stream-K GEMM with B `[N, K]`.
    nk: mk_gemm_streamk_nk
}

b_layout_entry_points! {
    SplitKParams => gemm_splitk;
    /// Split-K GEMM (few output tiles: every SM gets k-blocks of some tile) with B `[K, N]`.
    kn: mk_gemm_splitk_kn;
    /// Split-K GEMM with B `[N, K]`.
    nk: mk_gemm_splitk_nk
}

b_layout_entry_points! {
    GemmParams => gemm;
    /// GEMM with B `[K, N]` row-major.
    kn: mk_gemm_bf16_kn;
    /// GEMM with B `[N, K]` row-major (a torch `Linear` weight).
    nk: mk_gemm_bf16_nk
}

b_layout_entry_points! {
    GemmParams => gemm_deep;
    /// GEMM for memory-bound shapes (few rows: reading B, not the tensor cores, bounds it) with
    /// B `[K, N]`: the deep ring, stores straight from registers.
    kn: mk_gemm_deep_kn;
    /// The memory-bound GEMM with B `[N, K]`.
    nk: mk_gemm_deep_nk
}
