//! The persistent, warp-specialised engine of a compute CTA. Warpgroup 0 is the producer: one
//! thread waits for each tile's inputs (the scheduler's `wait_inputs`) and streams its A and B
//! k-blocks through the [`Pipeline`](crate::pipeline::Pipeline) ring with TMA (or, when the
//! input gate gathers A row by row, all 128 threads copy A's rows and thread 0 loads B).
//! Warpgroups 1 and 2 are consumers: each owns 64 rows of the 128-row tile, runs the wgmma
//! mainloop one k-block behind the loads, then hands its accumulators to the [`Epilogue`]. An epilogue with helpers
//! gets lane 0 of producer warps 1 and 2, one per consumer warpgroup (see
//! [`Handoff`](super::epilogue::Handoff)); otherwise an input gate may give those two warps side
//! work ([`InputGate::SIDE`]: AllGather + GEMM's copies). Registers move from the producer to the consumers with
//! `setmaxnreg`.
use super::epilogue::{Epilogue, StoreC};
use super::feed::Feed;
use super::mainloop::{load_b_k_block, load_k_block, mma_k_block, Acc256, Accumulators, Smem};
use crate::arch::*;
use crate::kernels_info::gemm::*;
use crate::pipeline::PipeState;
use crate::sched::{rem_nz, InputGate, TileScheduler, SIDE_THREAD, SIDE_THREADS};
use crate::sync::{stop, Bound};
use crate::tile::{swizzle128, SW128_ROW_BYTES};

/// Consumer warps that arrive on an "empty" barrier per k-block (every warp, after its own
/// `wgmma.wait_group`, so no warp's operands can be overwritten early).
const EMPTY_ARRIVALS: u32 = 8;

/// What the mainloop reads: tensor maps of A `[m, k]` and B, and `k`.
#[derive(Clone, Copy)]
pub struct Operands {
    /// Device address of A's tensor map (boxes of `a_rows` rows of `TILE_K` elements, 128-byte
    /// swizzle).
    pub a_map: u64,
    /// Rows of A's box: `TILE_M`, or fewer when A has fewer rows (`a_box_rows`).
    pub a_rows: u32,
    /// Device address of B's tensor map (box shape per the kernel's B layout).
    pub b_map: u64,
    /// The reduction length in elements: the mainloop runs `ceil(k / TILE_K)` k-blocks per tile.
    pub k: u32,
}

impl Operands {
    /// A, B and K as a GEMM's parameter block describes them, A's box `a_rows` tall.
    #[inline(always)]
    pub fn of(p: &crate::abi::GemmParams, a_rows: u32) -> Self {
        Operands { a_map: p.a_map, a_rows, b_map: p.b_map, k: p.k }
    }
}

/// Run this compute CTA, one of `ctas` walking the scheduler's tiles: a static walk takes tiles
/// `idx, idx + ctas, ...` (the grid's first `ctas` CTAs: roles put compute CTAs first, so `idx`
/// is `blockIdx.x`); a dynamic one ([`TileScheduler::DYNAMIC`]) draws them, and every one of the
/// `ctas` drawing CTAs runs this (or [`Feed::forfeit`]). Every thread of the CTA (`THREADS`)
/// calls it. A shared-memory barrier that never completes is
/// a bug or a dead device: the wait reports through `b` and the CTA traps, ending the grid.
///
/// `STAGES` is the depth of the shared-memory ring: `STAGES` of `kernels_info::gemm` for
/// compute-bound kernels (room for C staging tiles), `deep_stages(A::N)` for memory-bound ones.
/// `A`, the consumers' accumulators, fixes the tile width (see [`Accumulators`]); the
/// scheduler's tiles must be that wide.
///
/// # Safety
/// Launched with `THREADS` threads and `smem_bytes(STAGES, A::N)` of dynamic shared memory; the
/// operands (B's map with boxes as wide as the tile), the scheduler's memory and the epilogue's
/// outputs are valid for the launch.
#[inline(always)]
pub unsafe fn compute_cta<
    const TRANS_B: u32,
    const STAGES: u32,
    A: Accumulators,
    S: TileScheduler,
    G: InputGate,
    E: Epilogue<A>,
>(
    ops: &Operands,
    sched: &S,
    gate: &G,
    epi: &E,
    ctas: u32,
    b: Bound<'_>,
) {
    let smem = Smem::<STAGES, A>::at(dyn_smem_base());
    let tid = thread_idx_x();
    let wg = tid / 128;
    const { assert!(!(G::GATHER && E::HELPER), "gathering producers leave no helper threads") };
    const { assert!(!(G::GATHER && G::WRITES_A), "gathering producers leave no writer thread") };
    const { assert!(!(G::SIDE && (G::GATHER || E::HELPER)), "the side thread is a helper's lane") };
    if tid == 0 {
        // A gathered A adds one `cp.async` arrival per producer thread to every fill; the A
        // writer is one more reader of every stage.
        let readers = EMPTY_ARRIVALS + G::WRITES_A as u32;
        smem.pipeline().init_counts(if G::GATHER { 1 + 128 } else { 1 }, readers);
        epi.init(&smem);
        // A dynamic walk's positions are read by every consumer warp, the A writer, the
        // epilogue's helpers and a gathering producer's warps 1 to 3.
        let walkers = readers + 2 * E::HELPER as u32 + 3 * G::GATHER as u32;
        Feed::init::<S>(smem.tile_ring(), walkers);
    }
    sync_threads();
    // A static walk starts at `blockIdx.x`, read in each branch after `setmaxnreg`: a value live
    // across it must fit the producer's 40 (or 56) registers in one branch and costs a consumer
    // register in the other.
    let tiles = || Feed::of(sched, smem.tile_ring(), block_idx_x_here(), ctas);
    if wg == 0 {
        if G::WIDE_PRODUCER {
            setmaxnreg_dec::<56>();
        } else {
            setmaxnreg_dec::<40>();
        }
        if G::GATHER {
            produce_gathered::<TRANS_B, STAGES, A, S, G>(ops, sched, gate, &smem, tiles(), &b, tid);
        } else if tid == 0 {
            produce::<TRANS_B, STAGES, A, S, G>(ops, sched, gate, &smem, tiles(), &b);
        } else if G::WRITES_A && tid == A_WRITER {
            write_a::<STAGES, A, S, G>((ops, sched, gate), &smem, tiles(), &b);
        } else if G::SIDE && (SIDE_THREAD..SIDE_THREAD + SIDE_THREADS).contains(&tid) {
            gate.side(smem.side(), tid - SIDE_THREAD);
        } else if E::HELPER && (tid == 32 || tid == 64) {
            let cwg = tid / 32 - 1;
            let (mut feed, mut n) = (tiles(), 0);
            while let Some(i) = feed.consume(&b, false) {
                epi.help(&smem, sched.tile(i), n, cwg);
                n += 1;
            }
            epi.help_finish(cwg);
        }
    } else {
        if G::WIDE_PRODUCER {
            setmaxnreg_inc::<224>();
        } else {
            setmaxnreg_inc::<232>();
        }
        consume::<TRANS_B, STAGES, A, S, E>(ops, sched, epi, &smem, tiles(), &b, wg - 1, tid % 128, G::GATHER);
    }
}

/// A fused kernel's compute CTA whose tiles go straight into C ([`StoreC`]): the engine on the
/// staged ring in 256-column tiles, A in whole-tile boxes, with the kernel's own scheduler and
/// input gate (AllGather + GEMM's arrival order, the MoE's grouped rows).
///
/// # Safety
/// As for [`compute_cta`] with `STAGES` and [`Acc256`]; `g`'s tensor maps and C are valid.
#[inline(always)]
pub unsafe fn store_c_cta<const TRANS_B: u32, S: TileScheduler, G: InputGate>(
    g: &crate::abi::GemmParams,
    sched: &S,
    gate: &G,
    ctas: u32,
    b: Bound<'_>,
) {
    let ops = Operands::of(g, TILE_M);
    compute_cta::<TRANS_B, STAGES, Acc256, _, _, _>(&ops, sched, gate, &StoreC::of(g), ctas, b);
}

#[inline(always)]
unsafe fn produce<const TRANS_B: u32, const STAGES: u32, A: Accumulators, S: TileScheduler, G: InputGate>(
    ops: &Operands,
    sched: &S,
    gate: &G,
    smem: &Smem<STAGES, A>,
    mut tiles: Feed,
    b: &Bound<'_>,
) {
    prefetch_tensormap(ops.a_map);
    prefetch_tensormap(ops.b_map);
    let pipe = smem.pipeline();
    let k_blocks = ops.k.div_ceil(TILE_K);
    let tx_bytes = stage_tx_bytes(ops.a_rows, A::N, TRANS_B == 1);
    let mut st = PipeState::start();
    while let Some(i) = tiles.produce(sched, b) {
        let (kb0, kb1) = sched.k_range(i, k_blocks);
        if S::MAY_BE_EMPTY && kb0 == kb1 {
            continue;
        }
        let tile = sched.tile(i);
        let traced = |event| {
            if crate::trace::ON {
                crate::trace::stamp(gate.trace_epoch(), event, block_idx_x_here(), i, tile.m << 16 | tile.n);
            }
        };
        traced(crate::abi::trace::TILE_CLAIMED);
        // A failed input wait already reported and failed the launch; loading anyway lets every
        // CTA finish (the host then returns the report) instead of trapping.
        let _ = gate.wait(tile);
        traced(crate::abi::trace::TILE_READY);
        let (a_map, a_row) = gate.a_source(tile, ops.a_map, TILE_M);
        let origin = (a_row as i32, (tile.n * A::N) as i32);
        let b_row0 = gate.b_row0(tile) as i32;
        for kb in kb0..kb1 {
            if pipe.acquire(st, b, i).is_err() {
                stop(b.diag);
            }
            pipe.expect(st, tx_bytes);
            load_k_block::<TRANS_B, STAGES, A>(smem, a_map, ops.b_map, st.slot, pipe.full(st.slot), origin, b_row0, kb);
            st.advance();
            if S::DYNAMIC && kb1 - kb == sched.claim_ahead() {
                tiles.claim(sched);
            }
        }
    }
}

/// The producer warpgroup's thread that writes A stages out ([`InputGate::WRITES_A`]): lane 0
/// of warp 3 (warps 1 and 2 lend an epilogue their lane 0s).
const A_WRITER: u32 = 96;

/// The A writer: one more reader of every stage. Once a k-block the gate names
/// ([`InputGate::a_copy`]) has landed, it stores the stage's A box (TMA) while the consumers
/// multiply from it, and gives the stage back once the store has read it; other k-blocks it
/// gives back as soon as they land. The producer never waits for it: the copy costs the loads
/// nothing as long as a tile's share of stores (one SM writes some tens of GB/s) reads faster
/// than the consumers compute.
#[inline(always)]
unsafe fn write_a<const STAGES: u32, A: Accumulators, S: TileScheduler, G: InputGate>(
    (ops, sched, gate): (&Operands, &S, &G),
    smem: &Smem<STAGES, A>,
    mut tiles: Feed,
    b: &Bound<'_>,
) {
    let pipe = smem.pipeline();
    let k_blocks = ops.k.div_ceil(TILE_K);
    let mut st = PipeState::start();
    while let Some(i) = tiles.consume(b, false) {
        let (kb0, kb1) = sched.k_range(i, k_blocks);
        let to = gate.a_copy(sched.tile(i), TILE_M);
        for kb in kb0..kb1 {
            if pipe.wait(st, b, i).is_err() {
                stop(b.diag);
            }
            if let Some(c) = to.filter(|c| rem_nz(kb, c.stride) == c.first) {
                tma_store_2d(c.map, smem.a(st.slot), (kb * TILE_K) as i32, c.row as i32);
                bulk_commit_group();
                bulk_wait_group_read::<0>();
            }
            pipe.release(st.slot);
            st.advance();
        }
    }
    // The stores are done reading; their writes must land before the kernel ends.
    bulk_wait_group::<0>();
}

/// Named barrier of the gathering producer warpgroup (the consumers' epilogues use 1 and 2).
const GATHER_BARRIER: u32 = 8;

/// The producer warpgroup when A is gathered ([`InputGate::GATHER`]): thread `t` (of 128) copies
/// one 16-byte piece of eight of the tile's rows per k-block with `cp.async` (rows `t / 8 + 16 j`,
/// piece `t % 8`, stored where the 128-byte swizzle of a TMA box would put it, so the consumers
/// read the stage unchanged); thread 0 also waits on the gate and loads B by TMA. A dynamic walk
/// is drawn by thread 0, which hands each position to its warp; warps 1 to 3 read it from the
/// ring as the consumers do.
#[inline(always)]
unsafe fn produce_gathered<const TRANS_B: u32, const STAGES: u32, A: Accumulators, S: TileScheduler, G: InputGate>(
    ops: &Operands,
    sched: &S,
    gate: &G,
    smem: &Smem<STAGES, A>,
    mut tiles: Feed,
    b: &Bound<'_>,
    t: u32,
) {
    if t == 0 {
        prefetch_tensormap(ops.b_map);
    }
    let pipe = smem.pipeline();
    let k_blocks = ops.k.div_ceil(TILE_K);
    let b_bytes = stage_tx_bytes(0, A::N, TRANS_B == 1);
    let row_bytes = ops.k * 2;
    let piece = t % 8;
    let r0 = t / 8;
    // Rows 16 apart are two swizzle atoms apart: the piece sits at the same place in each.
    let at = swizzle128(r0, piece * 16);
    let any = gate.a_any();
    let mut st = PipeState::start();
    loop {
        // A static walk: every thread knows it without the ring.
        let i = if !S::DYNAMIC {
            tiles.produce(sched, b)
        } else if t < 32 {
            let drawn = if t == 0 { tiles.produce(sched, b).unwrap_or(u32::MAX) } else { 0 };
            Some(shfl_idx(drawn, 0)).filter(|&i| i != u32::MAX)
        } else {
            tiles.consume(b, true)
        };
        let Some(i) = i else {
            break;
        };
        let (kb0, kb1) = sched.k_range(i, k_blocks);
        if S::MAY_BE_EMPTY && kb0 == kb1 {
            continue;
        }
        let tile = sched.tile(i);
        if t == 0 {
            // As in `produce`: a failed wait reported; loading anyway lets the kernel end.
            let _ = gate.wait(tile);
        }
        // Every producer thread after the gate.
        named_barrier_sync(GATHER_BARRIER, 128);
        // The eight rows' addresses. Kept as 64-bit addresses they spill a few words at 40
        // registers, which measured faster than 32-bit offsets widened before every copy.
        let mut rows = [0u64; 8];
        for (j, row) in rows.iter_mut().enumerate() {
            *row = gate.a_row(tile, r0 + 16 * j as u32);
        }
        let n0 = (tile.n * A::N) as i32;
        let b_row0 = gate.b_row0(tile) as i32;
        for kb in kb0..kb1 {
            if pipe.acquire(st, b, i).is_err() {
                stop(b.diag);
            }
            let full = pipe.full(st.slot);
            if t == 0 {
                pipe.expect(st, b_bytes);
                load_b_k_block::<TRANS_B, STAGES, A>(smem, ops.b_map, st.slot, full, n0, b_row0, kb);
            }
            let off = kb * TILE_K * 2 + piece * 16;
            let valid = row_bytes.saturating_sub(off).min(16);
            let stage = smem.a(st.slot) + at;
            for (j, &row) in rows.iter().enumerate() {
                let (src, n) = if row == 0 || valid == 0 { (any, 0) } else { (row + off as u64, valid) };
                cp_async_16_zfill(stage + 16 * SW128_ROW_BYTES * j as u32, src, n);
            }
            cp_async_arrive_noinc(full);
            st.advance();
            if S::DYNAMIC && t == 0 && kb1 - kb == sched.claim_ahead() {
                tiles.claim(sched);
            }
        }
    }
}

#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn consume<const TRANS_B: u32, const STAGES: u32, A: Accumulators, S: TileScheduler, E: Epilogue<A>>(
    ops: &Operands,
    sched: &S,
    epi: &E,
    smem: &Smem<STAGES, A>,
    mut tiles: Feed,
    b: &Bound<'_>,
    cwg: u32,
    t: u32,
    gathered: bool,
) {
    let pipe = smem.pipeline();
    let k_blocks = ops.k.div_ceil(TILE_K);
    let lane = t % 32;
    let mut st = PipeState::start();
    let mut acc = A::ZERO;
    let mut n = 0u32;
    while let Some(i) = tiles.consume(b, true) {
        let (kb0, kb1) = sched.k_range(i, k_blocks);
        let tile = sched.tile(i);
        let mut prev = st;
        for kb in kb0..kb1 {
            if pipe.wait(st, b, i).is_err() {
                stop(b.diag);
            }
            if gathered {
                // The gathered rows were written by `cp.async` (the generic proxy); the wgmmas
                // read them through the async proxy.
                fence_proxy_async_shared();
            }
            wgmma::fence();
            mma_k_block::<TRANS_B, STAGES, A>(&mut acc, smem, st.slot, cwg, kb == kb0);
            wgmma::commit_group();
            // Keep this k-block's wgmmas in flight; the previous one's are done, so its slot can
            // go back to the producer.
            wgmma::wait_group::<1>();
            if kb > kb0 && lane == 0 {
                pipe.release(prev.slot);
            }
            prev = st;
            st.advance();
        }
        wgmma::wait_group::<0>();
        // An empty unit consumed no slot and has no tile to store. Skipped here, after the
        // (empty) k-loop: a branch around the wgmmas would make ptxas serialise them.
        if S::MAY_BE_EMPTY && kb0 == kb1 {
            continue;
        }
        if lane == 0 {
            pipe.release(prev.slot);
        }
        epi.store(smem, &mut acc, tile, n, cwg, t);
        n += 1;
    }
    if t == 0 {
        epi.finish(cwg);
    }
}
