//! The persistent, warp-specialised Hopper GEMM engine: `C = A @ B`, bf16 in, f32 accumulate.
//!
//! One CTA per SM walks output tiles of `TILE_M x TILE_N` in grouped order ([`TileGrid`]).
//! Warpgroup 0 is the producer: one thread streams A and B k-blocks into a `STAGES`-deep ring of
//! 128-byte-swizzled shared-memory slots with TMA, each slot guarded by a "full" mbarrier (TMA
//! bytes landed) and an "empty" mbarrier (both consumers are done with it). Warpgroups 1 and 2 are
//! consumers: each owns 64 rows of the tile and issues m64n256k16 wgmma from shared memory, one
//! k-block behind the loads. The epilogue rounds to bf16 into a swizzled staging tile and hands it
//! to TMA stores that drain while the next tile's mainloop already runs (f32 output is stored
//! directly). Registers move from the producer to the consumers with `setmaxnreg`.
//!
//! Fused kernels reuse the engine through [`TileHooks`]: a wait before a tile's loads (its data
//! may still be arriving from a peer) and a call after a tile's output is in global memory.
use crate::abi::*;
use crate::arch::*;
use crate::sched::{Role, TileGrid, TileIter};
use crate::sync::{wait_mbarrier, WaitSite};
use crate::tile::*;

pub use crate::kernels_info::gemm::*;
const _: () = assert!(A_STAGE_BYTES % SW128_ATOM_BYTES == 0 && B_STAGE_BYTES % SW128_ATOM_BYTES == 0);

/// Consumer warps that arrive on an "empty" barrier per k-block (every warp, after its own
/// `wgmma.wait_group`, so no warp's operands can be overwritten early).
const EMPTY_ARRIVALS: u32 = 8;

/// Hooks that let a fused kernel put communication around the GEMM engine's tiles.
pub trait TileHooks {
    /// Producer thread, before the first load of tile (`tm`, `tn`): wait until its inputs are
    /// present. `Err` stops the kernel (the wait recorded why).
    #[inline(always)]
    fn before_tile_loads(&self, _tm: u32, _tn: u32) -> Result<(), ()> {
        Ok(())
    }
    /// One thread per consumer warpgroup, once that warpgroup's rows of tile (`tm`, `tn`) are in
    /// global memory.
    #[inline(always)]
    fn after_tile_stored(&self, _tm: u32, _tn: u32, _wg: u32) {}
    /// CTAs whose role is not `Compute` run this instead of the engine.
    #[inline(always)]
    fn run_role(&self, _role: Role, _index: u32) {}
}

/// The plain GEMM: no communication.
pub struct NoHooks;
impl TileHooks for NoHooks {}

struct Smem {
    base: u32,
}

impl Smem {
    #[inline(always)]
    fn a(&self, s: u32) -> u32 {
        self.base + A_OFF + s * A_STAGE_BYTES
    }
    #[inline(always)]
    fn b(&self, s: u32) -> u32 {
        self.base + B_OFF + s * B_STAGE_BYTES
    }
    #[inline(always)]
    fn c(&self, wg: u32) -> u32 {
        self.base + C_OFF + wg * C_WG_BYTES
    }
    #[inline(always)]
    fn full(&self, s: u32) -> u32 {
        self.base + BAR_OFF + 8 * s
    }
    #[inline(always)]
    fn empty(&self, s: u32) -> u32 {
        self.base + BAR_OFF + 8 * (STAGES + s)
    }
}

/// Position in the ring: slot and the parity of its current use.
#[derive(Clone, Copy)]
struct Ring {
    slot: u32,
    phase: u32,
}

impl Ring {
    #[inline(always)]
    fn advance(&mut self) {
        self.slot += 1;
        if self.slot == STAGES {
            self.slot = 0;
            self.phase ^= 1;
        }
    }
}

#[inline(always)]
unsafe fn wait_or_trap(bar: u32, parity: u32, p: &GemmParams, tile: u32, what: u32) {
    let site = WaitSite { rank: 0, role: Role::Compute as u32, tile, what };
    if wait_mbarrier(bar, parity, p.timeout_ns, p.diag as *mut WaitDiag, site).is_err() {
        // A GEMM barrier that never completes is a bug or a dead device: the report is in
        // host-mapped memory, and trapping ends the grid instead of leaving it hung.
        trap();
    }
}

/// The engine. `TRANS_B` is 1 for B `[K, N]` (N-major), 0 for B `[N, K]` (K-major).
#[inline(always)]
pub unsafe fn gemm_engine<const TRANS_B: u32, H: TileHooks>(p: &GemmParams, hooks: &H) {
    let cta = block_idx_x();
    match p.roles.role_of(cta) {
        Some((Role::Compute, idx)) => compute_cta::<TRANS_B, H>(p, hooks, idx),
        Some((role, idx)) => hooks.run_role(role, idx),
        None => {}
    }
}

#[inline(always)]
unsafe fn compute_cta<const TRANS_B: u32, H: TileHooks>(p: &GemmParams, hooks: &H, idx: u32) {
    let smem = Smem { base: dyn_smem_base() };
    let grid = TileGrid::new(p.m, p.n, TILE_M, TILE_N, p.group_m);
    let k_blocks = p.k.div_ceil(TILE_K);
    let tid = thread_idx_x();
    let wg = tid / 128;

    if tid == 0 {
        for s in 0..STAGES {
            mbarrier_init(smem.full(s), 1);
            mbarrier_init(smem.empty(s), EMPTY_ARRIVALS);
        }
        fence_mbarrier_init();
    }
    sync_threads();

    let tl = TileLoop { p, hooks, smem, grid, tiles: TileIter::new(idx, p.roles.compute, grid.count()), k_blocks };
    if wg == 0 {
        setmaxnreg_dec::<40>();
        if tid == 0 {
            produce::<TRANS_B, H>(&tl);
        }
    } else {
        setmaxnreg_inc::<232>();
        consume::<TRANS_B, H>(&tl, wg - 1, tid % 128);
    }
}

/// What both roles of a compute CTA walk: the same tiles, ring and k-blocks.
struct TileLoop<'a, H> {
    p: &'a GemmParams,
    hooks: &'a H,
    smem: Smem,
    grid: TileGrid,
    tiles: TileIter,
    k_blocks: u32,
}

#[inline(always)]
unsafe fn produce<const TRANS_B: u32, H: TileHooks>(tl: &TileLoop<'_, H>) {
    let TileLoop { p, hooks, smem, grid, tiles, k_blocks } = tl;
    let (tiles, k_blocks) = (*tiles, *k_blocks);
    prefetch_tensormap(p.a_map);
    prefetch_tensormap(p.b_map);
    let mut ring = Ring { slot: 0, phase: 0 };
    for t in tiles {
        let (tm, tn) = grid.coords(t);
        if hooks.before_tile_loads(tm, tn).is_err() {
            trap();
        }
        let m0 = (tm * TILE_M) as i32;
        let n0 = (tn * TILE_N) as i32;
        for kb in 0..k_blocks {
            // A fresh barrier counts as having completed the phase before phase 0, so the first
            // pass through the ring does not wait.
            wait_or_trap(smem.empty(ring.slot), ring.phase ^ 1, p, t, WAIT_MBAR_EMPTY);
            let full = smem.full(ring.slot);
            mbarrier_arrive_expect_tx(full, A_STAGE_BYTES + B_STAGE_BYTES);
            let k0 = (kb * TILE_K) as i32;
            tma_load_2d(smem.a(ring.slot), p.a_map, full, k0, m0);
            if TRANS_B == 0 {
                tma_load_2d(smem.b(ring.slot), p.b_map, full, k0, n0);
            } else {
                // B [K, N]: four boxes of 64 N-columns x 64 K-rows.
                for j in 0..TILE_N / 64 {
                    tma_load_2d(smem.b(ring.slot) + j * 64 * SW128_ROW_BYTES, p.b_map, full, n0 + (64 * j) as i32, k0);
                }
            }
            ring.advance();
        }
    }
}

#[inline(always)]
unsafe fn mma_k_block<const TRANS_B: u32>(acc: &mut [f32; 128], a: u32, b: u32, first: bool) {
    for ks in 0..TILE_K / 16 {
        let da = SmemDesc::k_major(a).advance(ks * K16_STEP_K_MAJOR).0;
        let db = if TRANS_B == 0 {
            SmemDesc::k_major(b).advance(ks * K16_STEP_K_MAJOR).0
        } else {
            SmemDesc::mn_major(b, 64 * SW128_ROW_BYTES).advance(ks * K16_STEP_MN_MAJOR).0
        };
        // The tile's first product overwrites the accumulators (scale-d = 0): zeroing them with
        // ordinary moves would sit inside the wgmma pipeline and make ptxas serialise it.
        let accumulate = (!first || ks > 0) as u32;
        wgmma::mma_m64n256k16_bf16::<TRANS_B>(acc, da, db, accumulate);
    }
}

#[inline(always)]
unsafe fn consume<const TRANS_B: u32, H: TileHooks>(tl: &TileLoop<'_, H>, cwg: u32, t: u32) {
    let TileLoop { p, hooks, smem, grid, tiles, k_blocks } = tl;
    let (tiles, k_blocks) = (*tiles, *k_blocks);
    let lane = t % 32;
    let mut ring = Ring { slot: 0, phase: 0 };
    let mut acc = [0f32; 128];
    for tile in tiles {
        let (tm, tn) = grid.coords(tile);
        let mut prev = ring;
        for kb in 0..k_blocks {
            wait_or_trap(smem.full(ring.slot), ring.phase, p, tile, WAIT_MBAR_FULL);
            wgmma::fence();
            mma_k_block::<TRANS_B>(
                &mut acc,
                smem.a(ring.slot) + cwg * 64 * SW128_ROW_BYTES,
                smem.b(ring.slot),
                kb == 0,
            );
            wgmma::commit_group();
            // Keep this k-block's wgmmas in flight; the previous one's are done, so its slot
            // can go back to the producer.
            wgmma::wait_group::<1>();
            if kb > 0 && lane == 0 {
                mbarrier_arrive(smem.empty(prev.slot));
            }
            prev = ring;
            ring.advance();
        }
        wgmma::wait_group::<0>();
        if lane == 0 {
            mbarrier_arrive(smem.empty(prev.slot));
        }
        if p.out_f32 != 0 {
            store_f32(p, &acc, tm, tn, cwg, t);
        } else {
            store_bf16(p, smem, &acc, tm, tn, cwg, t);
        }
        if t == 0 {
            if p.out_f32 == 0 {
                bulk_wait_group::<0>();
            }
            hooks.after_tile_stored(tm, tn, cwg);
        }
    }
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

macro_rules! unroll32 {
    ($f:ident) => {
        $f!(0);
        $f!(1);
        $f!(2);
        $f!(3);
        $f!(4);
        $f!(5);
        $f!(6);
        $f!(7);
        $f!(8);
        $f!(9);
        $f!(10);
        $f!(11);
        $f!(12);
        $f!(13);
        $f!(14);
        $f!(15);
        $f!(16);
        $f!(17);
        $f!(18);
        $f!(19);
        $f!(20);
        $f!(21);
        $f!(22);
        $f!(23);
        $f!(24);
        $f!(25);
        $f!(26);
        $f!(27);
        $f!(28);
        $f!(29);
        $f!(30);
        $f!(31);
    };
}

/// Round to bf16 into this warpgroup's 64 x 256 staging tile (four 64 x 64 swizzled boxes), then
/// one thread issues the TMA stores. The staging tile is reused only after the previous tile's
/// stores finished reading it.
#[inline(always)]
unsafe fn store_bf16(p: &GemmParams, smem: &Smem, acc: &[f32; 128], tm: u32, tn: u32, cwg: u32, t: u32) {
    let bar_id = 1 + cwg;
    if t == 0 {
        bulk_wait_group_read::<0>();
    }
    named_barrier_sync(bar_id, 128);
    let c = smem.c(cwg);
    let w = t / 32;
    let l = t % 32;
    let row = 16 * w + l / 4;
    macro_rules! put {
        ($j:literal) => {{
            let col = 8 * $j + 2 * (l % 4);
            let chunk = c + (col / 64) * 64 * SW128_ROW_BYTES;
            let byte = (col % 64) * 2;
            st_shared_u32(chunk + swizzle128(row, byte), pack_bf16x2(acc[4 * $j], acc[4 * $j + 1]));
            st_shared_u32(chunk + swizzle128(row + 8, byte), pack_bf16x2(acc[4 * $j + 2], acc[4 * $j + 3]));
        }};
    }
    unroll32!(put);
    fence_proxy_async_shared();
    named_barrier_sync(bar_id, 128);
    if t == 0 {
        let m0 = (tm * TILE_M + cwg * 64) as i32;
        if (m0 as u32) < p.m {
            for j in 0..TILE_N / 64 {
                let n0 = tn * TILE_N + 64 * j;
                if n0 < p.n {
                    tma_store_2d(p.c_map, c + j * 64 * SW128_ROW_BYTES, n0 as i32, m0);
                }
            }
        }
        bulk_commit_group();
    }
}

/// f32 output: straight from registers, two columns per store, clipped to the matrix.
#[inline(always)]
unsafe fn store_f32(p: &GemmParams, acc: &[f32; 128], tm: u32, tn: u32, cwg: u32, t: u32) {
    let w = t / 32;
    let l = t % 32;
    let row = tm * TILE_M + cwg * 64 + 16 * w + l / 4;
    let out = p.c_f32 as *mut [f32; 2];
    let n = p.n as usize;
    macro_rules! put {
        ($j:literal) => {{
            let col = tn * TILE_N + 8 * $j + 2 * (l % 4);
            if col < p.n {
                if row < p.m {
                    *out.add((row as usize * n + col as usize) / 2) = [acc[4 * $j], acc[4 * $j + 1]];
                }
                if row + 8 < p.m {
                    *out.add(((row + 8) as usize * n + col as usize) / 2) = [acc[4 * $j + 2], acc[4 * $j + 3]];
                }
            }
        }};
    }
    unroll32!(put);
}

/// GEMM with B `[K, N]` row-major.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_gemm_bf16_kn(p: GemmParams) {
    crate::launch_bounds!(384, 1);
    gemm_engine::<1, NoHooks>(&p, &NoHooks);
}

/// GEMM with B `[N, K]` row-major (a torch `Linear` weight).
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_gemm_bf16_nk(p: GemmParams) {
    crate::launch_bounds!(384, 1);
    gemm_engine::<0, NoHooks>(&p, &NoHooks);
}
