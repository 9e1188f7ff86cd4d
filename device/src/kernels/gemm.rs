//! The plain GEMM `C = A @ B` (bf16 in, f32 accumulate, bf16 or f32 out): the framework's engine
//! with the grouped-raster scheduler and the local-store epilogue, one CTA per SM, on the staged
//! ring (compute-bound shapes, 256-column tiles) or a deep one (few rows: bound by reading B;
//! tiles 64, 128, 192, 224 or 256 columns wide, so that small shapes still have a tile per SM
//! and the last wave of a compute-bound one is not mostly idle); and its
//! split-K and stream-K forms for shapes with too few output tiles to fill the GPU even so (the
//! `SplitK` / `StreamK` schedulers and the `SplitKStore` epilogue around the same local store),
//! which are memory-bound by construction and run deep.
use crate::abi::*;
use crate::arch::*;
use crate::comm::signal::launch_epoch;
use crate::gemm::engine::Operands;
use crate::gemm::*;
use crate::sched::{
    GaveUp, GroupedRaster, InputGate, KSplit, NoGate, Role, SplitK, StreamK, Tile, TileGrid, TileScheduler,
};
use crate::sync::Bound;

/// The plain GEMM's pieces for the parameter block `p`, in tiles as wide as `A`.
#[inline(always)]
pub fn parts<A: Accumulators>(p: &GemmParams) -> (Operands, GroupedRaster, StoreC) {
    (Operands::of(p, a_box_rows(p.m)), GroupedRaster(TileGrid::new(p.m, p.n, TILE_M, A::N, p.group_m)), StoreC::of(p))
}

/// The plain GEMM on a ring of `STAGES`, in tiles as wide as `A`.
#[inline(always)]
unsafe fn gemm_ring<const TRANS_B: u32, const STAGES: u32, A: Accumulators>(p: &GemmParams) {
    gemm_ring_gated::<TRANS_B, STAGES, A, _>(p, &NoGate);
}

/// The GEMM on a ring of `STAGES`, in tiles as wide as `A`, its inputs through `gate` (the
/// plain GEMM's [`NoGate`], the gathered GEMM's row table).
#[inline(always)]
unsafe fn gemm_ring_gated<const TRANS_B: u32, const STAGES: u32, A: Accumulators, G: InputGate>(
    p: &GemmParams,
    gate: &G,
) {
    let cta = block_idx_x();
    if cta >= p.roles.compute {
        return;
    }
    let (ops, sched, epi) = parts::<A>(p);
    let b = Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: 0, role: Role::Compute as u32 };
    if crate::trace::ON && thread_idx_x() == 0 {
        crate::trace::start(gate.trace_epoch(), Some((Role::Compute, cta)), 0);
    }
    compute_cta::<TRANS_B, STAGES, A, _, _, _>(&ops, &sched, gate, &epi, p.roles.compute, b);
    if crate::trace::ON {
        crate::trace::warp_done(gate.trace_epoch());
    }
}

#[inline(always)]
unsafe fn gemm<const TRANS_B: u32>(p: &GemmParams) {
    gemm_ring::<TRANS_B, STAGES, Acc256>(p);
}

/// The split-K and stream-K GEMMs' common body: the epoch, then the engine (deep ring of
/// `STAGES`, tiles as wide as `A`) with scheduler `sched` and the summing epilogue around the
/// local store.
#[inline(always)]
unsafe fn gemm_split<const TRANS_B: u32, const STAGES: u32, A: Accumulators, K: KSplit + TileScheduler>(
    p: &SplitKParams,
    sched: impl Fn(TileGrid) -> K,
) {
    let g = &p.gemm;
    if block_idx_x() >= g.roles.compute {
        return;
    }
    let scratch = dyn_smem_base() + scratch_off(STAGES, A::N);
    if thread_idx_x() == 0 {
        st_shared_u32(scratch, launch_epoch(p.launches as *mut u64, g.roles.compute));
    }
    sync_threads();
    let (ops, GroupedRaster(grid), store) = parts::<A>(g);
    let bound = Bound { timeout_ns: g.timeout_ns, diag: &g.diag, rank: 0, role: Role::Compute as u32 };
    let epi = SplitKStore {
        inner: store,
        sched: sched(grid),
        workspace: p.workspace,
        counters: p.counters,
        parallel: p.parallel != 0,
        epoch: ld_shared_u32(scratch),
        reset: false,
        bound,
    };
    compute_cta::<TRANS_B, STAGES, A, _, _, _>(&ops, &epi.sched, &NoGate, &epi, g.roles.compute, bound);
}

/// The gathered GEMM's gate: nothing to wait for; row `r` of tile row `m` is A's row
/// `rows[m * TILE_M + r]`.
struct GatherRows<'a>(&'a GatherGemmParams);

impl InputGate for GatherRows<'_> {
    const GATHER: bool = true;
    // Eight 64-bit row addresses spill at 40 registers, and with B `[K, N]` the reloads in every
    // k-block cost 10% (0.82-0.88x cuBLAS against 0.91-0.97x at 56, PERF.md).
    const WIDE_PRODUCER: bool = true;

    #[inline(always)]
    unsafe fn wait(&self, _tile: Tile) -> Result<(), GaveUp> {
        Ok(())
    }

    #[inline(always)]
    unsafe fn a_row(&self, tile: Tile, r: u32) -> u64 {
        let p = self.0;
        let i = tile.m * TILE_M + r;
        if i >= p.gemm.m {
            return 0;
        }
        let row = *(p.rows as *const u32).add(i as usize);
        if row < p.a_rows {
            return p.a + row as u64 * p.a_stride as u64;
        }
        if row != u32::MAX {
            let e = p.errors as *mut u32;
            if atom_cas_relaxed_gpu_u32(e, 0, 1) == 0 {
                *e.add(1) = i;
                *e.add(2) = row;
            }
        }
        0
    }

    #[inline(always)]
    fn a_any(&self) -> u64 {
        self.0.a
    }
}

/// The gathered GEMM in 256-column tiles on the staged ring.
#[inline(always)]
unsafe fn gemm_gather<const TRANS_B: u32>(p: &GatherGemmParams) {
    gemm_ring_gated::<TRANS_B, STAGES, Acc256, _>(&p.gemm, &GatherRows(p));
}

b_layout_entry_points! {
    GatherGemmParams => gemm_gather;
    /// The gathered GEMM `C[i] = A[rows[i]] @ B` with B `[K, N]` (A's rows copied by the
    /// producer warpgroup, no tensor map of A).
    kn: mk_gemm_gather_kn;
    /// The gathered GEMM with B `[N, K]`.
    nk: mk_gemm_gather_nk
}

#[inline(always)]
unsafe fn gemm_streamk<const TRANS_B: u32>(p: &SplitKParams) {
    let k_blocks = p.gemm.k.div_ceil(TILE_K);
    gemm_split::<TRANS_B, DEEP_STAGES, Acc256, _>(p, |grid| StreamK::new(grid, k_blocks, p.gemm.roles.compute));
}

/// The memory-bound kernels of one tile width, on its deep ring: `$deep`, the plain GEMM, and
/// `$split`, split-K.
macro_rules! deep_bodies {
    ($acc:ty => $deep:ident, $split:ident) => {
        #[inline(always)]
        unsafe fn $deep<const TRANS_B: u32>(p: &GemmParams) {
            gemm_ring::<TRANS_B, { deep_stages(<$acc as Accumulators>::N) }, $acc>(p);
        }

        #[inline(always)]
        unsafe fn $split<const TRANS_B: u32>(p: &SplitKParams) {
            gemm_split::<TRANS_B, { deep_stages(<$acc as Accumulators>::N) }, $acc, _>(p, |grid| SplitK {
                grid,
                splits: p.splits,
            });
        }
    };
}

deep_bodies!(Acc256 => gemm_deep, gemm_splitk);
deep_bodies!(Acc224 => gemm_deep_n224, gemm_splitk_n224);
deep_bodies!(Acc192 => gemm_deep_n192, gemm_splitk_n192);
deep_bodies!(Acc128 => gemm_deep_n128, gemm_splitk_n128);
deep_bodies!(Acc64 => gemm_deep_n64, gemm_splitk_n64);

b_layout_entry_points! {
    SplitKParams => gemm_streamk;
    /// Stream-K GEMM (fewer tiles than SMs, too many to split evenly) with B `[K, N]`.
    kn: mk_gemm_streamk_kn;
    /// Stream-K GEMM with B `[N, K]`.
    nk: mk_gemm_streamk_nk
}

b_layout_entry_points! {
    SplitKParams => gemm_splitk;
    /// Split-K GEMM (few output tiles: every SM gets k-blocks of some tile) with B `[K, N]`,
    /// tiles 256 wide.
    kn: mk_gemm_splitk_kn;
    /// Split-K GEMM with B `[N, K]`, tiles 256 wide.
    nk: mk_gemm_splitk_nk
}

b_layout_entry_points! {
    SplitKParams => gemm_splitk_n224;
    /// Split-K GEMM with B `[K, N]`, tiles 224 wide.
    kn: mk_gemm_splitk_n224_kn;
    /// Split-K GEMM with B `[N, K]`, tiles 224 wide.
    nk: mk_gemm_splitk_n224_nk
}

b_layout_entry_points! {
    SplitKParams => gemm_splitk_n192;
    /// Split-K GEMM with B `[K, N]`, tiles 192 wide.
    kn: mk_gemm_splitk_n192_kn;
    /// Split-K GEMM with B `[N, K]`, tiles 192 wide.
    nk: mk_gemm_splitk_n192_nk
}

b_layout_entry_points! {
    SplitKParams => gemm_splitk_n128;
    /// Split-K GEMM with B `[K, N]`, tiles 128 wide.
    kn: mk_gemm_splitk_n128_kn;
    /// Split-K GEMM with B `[N, K]`, tiles 128 wide.
    nk: mk_gemm_splitk_n128_nk
}

b_layout_entry_points! {
    SplitKParams => gemm_splitk_n64;
    /// Split-K GEMM with B `[K, N]`, tiles 64 wide.
    kn: mk_gemm_splitk_n64_kn;
    /// Split-K GEMM with B `[N, K]`, tiles 64 wide.
    nk: mk_gemm_splitk_n64_nk
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
    /// B `[K, N]`: the deep ring, stores straight from registers, tiles 256 wide.
    kn: mk_gemm_deep_kn;
    /// The memory-bound GEMM with B `[N, K]`, tiles 256 wide.
    nk: mk_gemm_deep_nk
}

b_layout_entry_points! {
    GemmParams => gemm_deep_n224;
    /// The GEMM in 224-column tiles (whole waves at N = 14336, 28672) with B `[K, N]`: the
    /// deep ring (4 stages), stores straight from registers.
    kn: mk_gemm_deep_n224_kn;
    /// The GEMM in 224-column tiles with B `[N, K]`.
    nk: mk_gemm_deep_n224_nk
}

b_layout_entry_points! {
    GemmParams => gemm_deep_n192;
    /// The GEMM in 192-column tiles with B `[K, N]`: the deep ring (5 stages), stores straight
    /// from registers.
    kn: mk_gemm_deep_n192_kn;
    /// The GEMM in 192-column tiles with B `[N, K]`.
    nk: mk_gemm_deep_n192_nk
}

b_layout_entry_points! {
    GemmParams => gemm_deep_n128;
    /// The memory-bound GEMM with B `[K, N]`, tiles 128 wide (7-stage ring).
    kn: mk_gemm_deep_n128_kn;
    /// The memory-bound GEMM with B `[N, K]`, tiles 128 wide.
    nk: mk_gemm_deep_n128_nk
}

b_layout_entry_points! {
    GemmParams => gemm_deep_n64;
    /// The memory-bound GEMM with B `[K, N]`, tiles 64 wide (9-stage ring).
    kn: mk_gemm_deep_n64_kn;
    /// The memory-bound GEMM with B `[N, K]`, tiles 64 wide.
    nk: mk_gemm_deep_n64_nk
}
