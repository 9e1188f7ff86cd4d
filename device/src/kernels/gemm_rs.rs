//! GEMM + ReduceScatter and GEMM + AllReduce in one persistent launch, written from the
//! framework's pieces (see [`GemmRsParams`] for the data and flag layout):
//! - the GEMM engine with the [`OwnerTiles`] scheduler (other owners' tiles first, this rank's
//!   own following `lead` rounds behind), a gate that maps each owner block's tile rows to rows
//!   of A, and the [`ReduceEpilogue`] with a helper thread per consumer warpgroup
//!   ([`Handoff`]): the consumers only compute, round and stage; the helpers wait for flags,
//!   move the data, wait for the copies and raise flags, under the consumers' next mainloop;
//! - a tile owned by another rank: the consumers round it to bf16 into their staging tile in the
//!   accumulators' own layout (thread t's j-th 16 bytes at `(j * 128 + t) * 16`: conflict-free,
//!   one contiguous half tile). Owners pulling ([`GemmRsParams::pulls`]): the helper bulk-copies
//!   it into this rank's own outbox and flags the owner, who pulls it over NVLink. Sources
//!   pushing (`push`): the helper pushes it into the owner's inbox slot for this source over
//!   NVLink, then flags it. With `prefetch` (owners pulling, one node) the helper then pulls the
//!   same tile of this rank's own block from that owner, which computed it in the same round,
//!   into its inbox and raises a local `pref` flag. (Measured on 2 x H200: NVLink writes from a
//!   GEMM's SMs slow the GEMM by 4-11%, reads of the same bytes by half as much; pulled at the
//!   own tiles, the all-reduce's reads crowd into the half of the launch where its second phase
//!   writes, and it was 2-8% slower than pushing; prefetched, 3-5% faster. On 4 x H200 the
//!   reduce-scatter's owners pull three partials per own tile, one load at a time per helper,
//!   and pushing was 2.5-5% faster.)
//! - an own tile: while the consumers still multiply, the helper waits for every other source's
//!   flag and pulls the partials into the inbox (prefetched: waits for the `pref` flags; pushed:
//!   waits for the sources' flags), leaving one of them in the staging tile
//!   ([`ReduceEpilogue::staged_source`]: the last pulled, or loaded from the inbox; several
//!   nodes: the same for a collected tile's node's partials) and bringing
//!   the others into L2; the consumers then sum the partials in fp32, this rank's first and then
//!   the others in rank order (every partial
//!   rounded to bf16 exactly once, so the unfused reference, summing in the same order, gives the
//!   same bits), and stage the sum; the helper TMA-stores it into this rank's block of the
//!   output, and with `all_reduce` into the same block of every local rank's output, then flags
//!   it there; each rank's helpers finally wait for the blocks of the others. (f32 output: the
//!   consumers store from registers and flag themselves.) With `pull_reduced` the helper flags
//!   its stored sum instead and pulls the other ranks' sums of the same tile (computed in the
//!   same round) into its own output through the staging tile: NVLink reads, not writes.
//!
//! One-shot all-reduce (`mk_gemm_ar_one_shot_*`, one node): every rank walks every tile in the
//! same order; the consumers stage their partial, the helper pushes it into every other rank's
//! inbox slot for (this source, this tile) and flags it there, then waits for every other
//! rank's partial of the same tile (computed at about the same time) and lets the consumers sum
//! them all, in the owner-first order above (mine read back from the staging tile), into this
//! rank's own output. Only partials cross NVLink, and no tile waits for a second hop: for small
//! outputs, where the two-phase form's own tiles and copies form a tail, this is faster.
//!
//! Several nodes (`mk_gemm_rs_nodes_*`, [`NodeTiles`]): the same epilogue with each block's
//! *collector* on this node (`sched::NodeMap`) in the owner's place; a collected tile's sum is
//! the node partial, rounded to bf16 and handed by the helper to this rank's node-partial slot
//! (`GemmRsParams::node_offset`) and flag, where the inter-send and inter-reduce CTAs of
//! [`super::gemm_rs_nodes`] take over. The one-node kernels are the same code with
//! `NODES = false` (every several-node branch folds away).
//!
//! Writers wait for the receiver's `ready` flag of the launch first (it entered the launch, so it
//! is done with the previous launch's slots and output), and the epoch comes from the launch
//! counter, so back-to-back launches and CUDA-graph replays need no reset.
use crate::abi::*;
use crate::arch::*;
use crate::comm::peers_from_next;
use crate::comm::signal::{count_published, launch_epoch, signal, signal_gpu};
use crate::gemm::engine::Operands;
use crate::gemm::epilogue::{half_tile_boxes, store_f32, tma_store_tile, write_bf16, Handoff};
use crate::gemm::mainloop::Smem;
use crate::gemm::*;
use crate::sched::{div_nz, rem_nz, GaveUp, InputGate, OwnerTiles, Role, Tile, TileGrid};
use crate::sync::{Bound, WaitResult};
use crate::tile::SW128_ROW_BYTES;
use crate::{abi::trace as trace_ev, trace};

/// The epoch of this launch, which thread 0 put into shared memory before the engine's first
/// block barrier.
#[inline(always)]
fn epoch() -> u32 {
    // SAFETY: SCRATCH_OFF lies inside the dynamic shared memory every launch of this kernel has.
    unsafe { ld_shared_u32(dyn_smem_base() + SCRATCH_OFF) }
}

/// With the `trace` feature, a clock reading to time a wait from (0 without).
#[inline(always)]
fn trace_clock() -> u64 {
    if trace::ON {
        globaltimer_ns()
    } else {
        0
    }
}

/// With the `trace` feature, stamp `event` of tile `index` with the ns since `since`
/// ([`trace_clock`]).
#[inline(always)]
fn trace_waited(event: u32, index: u32, since: u64) {
    if trace::ON {
        let ns = globaltimer_ns().saturating_sub(since).min(u32::MAX as u64) as u32;
        // SAFETY: any thread may stamp (the buffer's slots are claimed atomically).
        unsafe { trace::stamp(epoch(), event, block_idx_x_here(), index, ns) };
    }
}

/// Accumulators `8j .. 8j + 8` rounded to bf16: 16 bytes, the j-th chunk of a thread's part of a
/// staging slot.
#[inline(always)]
fn chunk_bf16(acc: &[f32; 128], j: usize) -> [u32; 4] {
    [
        pack_bf16x2(acc[8 * j], acc[8 * j + 1]),
        pack_bf16x2(acc[8 * j + 2], acc[8 * j + 3]),
        pack_bf16x2(acc[8 * j + 4], acc[8 * j + 5]),
        pack_bf16x2(acc[8 * j + 6], acc[8 * j + 7]),
    ]
}

/// Adds 16 bytes of a bf16 partial in [`chunk_bf16`]'s layout to accumulators `8j .. 8j + 8`
/// (`j` a constant where it is inlined, so the accumulators stay in registers).
#[inline(always)]
fn add_chunk(acc: &mut [f32; 128], j: usize, w: [u32; 4]) {
    for i in 0..4 {
        let (lo, hi) = unpack_bf16x2(w[i]);
        acc[8 * j + 2 * i] += lo;
        acc[8 * j + 2 * i + 1] += hi;
    }
}

/// Every accumulator rounded to bf16 into a staging tile in their own layout (thread t's j-th
/// 16 bytes at `(j * 128 + t) * 16`: conflict-free, one contiguous half tile). Unrolled: the
/// accumulators must stay in registers (a run-time index would put them in local memory and
/// serialise the wgmma pipeline).
///
/// # Safety
/// `c` is a warpgroup's staging tile that no copy still reads.
#[inline(always)]
unsafe fn put_chunks(c: u32, acc: &[f32; 128], t: u32) {
    macro_rules! put {
        ($j:expr) => {
            st_shared_v4_u32(c + (($j * 128 + t) * 16), chunk_bf16(acc, $j));
        };
    }
    unroll16!(put);
}

/// Maps an owner block's tile rows to rows of A (and waits for nothing: A and B are local).
struct OwnerRows<'a> {
    p: &'a GemmRsParams,
    tiles: OwnerTiles,
}

impl InputGate for OwnerRows<'_> {
    #[inline(always)]
    unsafe fn wait(&self, _tile: Tile) -> Result<(), GaveUp> {
        Ok(())
    }

    #[inline(always)]
    fn trace_epoch(&self) -> u32 {
        if trace::ON {
            epoch()
        } else {
            0
        }
    }

    #[inline(always)]
    fn a_source(&self, tile: Tile, a_map: u64, tile_m: u32) -> (u64, u32) {
        let o = self.tiles.locate(tile.m, tile.n);
        (a_map, o.owner * self.p.rows + o.tm * tile_m)
    }
}

/// The epilogue described in the module docs; `NODES`: the several-node kernel's; `ONE_SHOT`:
/// the one-shot all-reduce's (one node only).
pub struct ReduceEpilogue<'a, const NODES: bool, const ONE_SHOT: bool> {
    p: &'a GemmRsParams,
    tiles: OwnerTiles,
}

/// Entry `lr` of one of the [`PeerTable`]'s arrays.
///
/// # Safety
/// `table` points to a live `PeerTable`; `lr < MAX_LOCAL_RANKS`.
#[inline(always)]
pub(super) unsafe fn peer(table: *const [u64; MAX_LOCAL_RANKS], lr: u32) -> u64 {
    *(table as *const u64).add(lr as usize)
}

impl<const NODES: bool, const ONE_SHOT: bool> ReduceEpilogue<'_, NODES, ONE_SHOT> {
    #[inline(always)]
    fn table(&self) -> &PeerTable {
        // SAFETY: the host uploads the table before the launch and keeps it alive.
        unsafe { &*(self.p.peers as *const PeerTable) }
    }

    #[inline(always)]
    fn bound(&self) -> Bound<'_> {
        Bound {
            timeout_ns: self.p.gemm.timeout_ns,
            diag: &self.p.gemm.diag,
            rank: self.p.rank,
            role: Role::Compute as u32,
        }
    }

    /// Wait (one thread, bounded) until my flag `index` reaches this launch's epoch; `tag` names
    /// the wait in a timeout report.
    #[inline(always)]
    unsafe fn wait_flag(&self, index: u32, tag: u32) -> WaitResult {
        self.bound().flag((self.p.flags as *const u32).add(index as usize), epoch(), tag)
    }

    /// Raise local rank `lr`'s flag `index` (mapped here) to this launch's epoch.
    #[inline(always)]
    unsafe fn signal_peer(&self, lr: u32, index: u32) {
        signal((peer(&self.table().flags, lr) as *mut u32).add(index as usize), epoch());
    }

    /// Wait (one thread) until local rank `lr` entered this launch: it is done with the previous
    /// launch's slots and output, so they may be written.
    #[inline(always)]
    unsafe fn wait_ready(&self, lr: u32) {
        let p = self.p;
        if lr != p.local_rank {
            let rank = p.rank - p.local_rank + lr;
            let _ = self.wait_flag(GemmRsParams::ready_flag(rank), rank);
        }
    }

    /// Raise flag `index` at every other local rank.
    #[inline(always)]
    unsafe fn signal_others(&self, index: u32) {
        let p = self.p;
        for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
            self.signal_peer(lr, index);
        }
    }

    /// The copy engines' part of a half tile this helper put into my own memory (bulk copies
    /// waited for): raise my mirror flag `mirror` to this launch's epoch and count the half tile
    /// on band `b`'s counter of `phase`. See [`GemmRsParams::engine_counts`].
    #[inline(always)]
    unsafe fn publish_for_engines(&self, mirror: u32, phase: u32, b: u32) {
        let p = self.p;
        signal_gpu((p.flags as *mut u32).add(mirror as usize), epoch());
        count_published((p.engine_counts as *mut u32).add(p.engine_count(phase, b) as usize));
    }

    /// Whether this rank sums block `q`'s partials: its owner (one node) or its collector.
    #[inline(always)]
    fn sums(&self, q: u32) -> bool {
        if NODES {
            self.p.node_map().collects(q)
        } else {
            q == self.p.rank
        }
    }

    /// Where the partials of a block `q` this rank sums come from: (the inbox index of the
    /// first source, the sources, this rank's index among them). One node: every rank; several
    /// nodes: this node's ranks, in the inbox of `q`'s node ([`GemmRsParams::inbox`]).
    #[inline(always)]
    fn sources(&self, q: u32) -> (u32, u32, u32) {
        let p = self.p;
        if NODES {
            (p.inbox(p.node_map().block_node(q), 0), p.local_world, p.local_rank)
        } else {
            (0, p.world, p.rank)
        }
    }

    /// The source (an index into [`Self::sources`]) whose partial of a tile this rank sums the
    /// helper leaves in the staging tile for the consumers' sum (two phases; `u32::MAX`: none,
    /// every partial is read from the inbox): owners or collectors pulling without prefetches,
    /// the last one pulled through it; otherwise the first other source in the sum's order,
    /// loaded from the inbox under the mainloop. Read from global memory at the end of a tile,
    /// the partials cost the consumers 2-3% of the launch at world 2 (docs/PERF.md, eleventh
    /// session); from shared memory, little.
    #[inline(always)]
    fn staged_source(&self) -> u32 {
        let p = self.p;
        // Every block's sources are the same ranks: a node's (several nodes) or all of them.
        let (count, me) = if NODES { (p.local_world, p.local_rank) } else { (p.world, p.rank) };
        if ONE_SHOT || count < 2 {
            u32::MAX
        } else if p.pulls() && !p.prefetches() {
            rem_nz(me + count - 1, count)
        } else {
            (me == 0) as u32
        }
    }

    /// Sum every source's partial of this warpgroup's half of my tile `slot` of block `q` into
    /// `acc`: this rank's first, then the others in rank order, each partial rounded to bf16,
    /// sums in fp32. The partials are in (the helper saw their flags): the
    /// [`Self::staged_source`]'s in the staging tile `c`, the others in the inbox.
    #[inline(always)]
    unsafe fn sum_partials(&self, acc: &mut [f32; 128], q: u32, slot: u32, c: u32, cwg: u32, t: u32) {
        let p = self.p;
        let (base, count, me) = self.sources(q);
        let staged = self.staged_source();
        // This rank's partial first, rounded like every other, then the others in rank order,
        // accumulated in place (a second 128-value array would not fit in registers).
        macro_rules! round {
            ($j:expr) => {{
                let w = chunk_bf16(acc, $j);
                for i in 0..4 {
                    let (lo, hi) = unpack_bf16x2(w[i]);
                    acc[8 * $j + 2 * i] = lo;
                    acc[8 * $j + 2 * i + 1] = hi;
                }
            }};
        }
        unroll16!(round);
        for s in 0..count {
            if s == me {
                continue;
            }
            if s == staged {
                macro_rules! add_staged {
                    ($j:expr) => {
                        add_chunk(acc, $j, ld_shared_v4_u32(c + (($j * 128 + t) * 16)))
                    };
                }
                unroll16!(add_staged);
            } else {
                let src = (p.staging + p.slot_offset(base + s, slot, cwg)) as *const [u32; 4];
                macro_rules! add_global {
                    ($j:expr) => {
                        add_chunk(acc, $j, ld_global_v4_u32(src.add($j * 128 + t as usize)))
                    };
                }
                unroll16!(add_global);
            }
        }
    }

    /// f32 all-reduce: copy this warpgroup's 64 rows of the tile from my output block (just
    /// stored by the warpgroup, visible after its named barrier) to local rank `lr`'s, 16 bytes
    /// per thread and step. A plain loop: storing from the accumulators once per rank would keep
    /// every store address live across the loop and spill.
    #[inline(always)]
    unsafe fn copy_f32_rows(&self, lr: u32, tile: Tile, cwg: u32, t: u32) {
        let p = self.p;
        let n = p.gemm.n;
        let row0 = tile.m * TILE_M + cwg * 64;
        let col0 = tile.n * TILE_N;
        let rows = if row0 >= p.rows { 0 } else { (p.rows - row0).min(64) };
        let cols = if col0 >= n { 0 } else { (n - col0).min(TILE_N) };
        let (src, dst) = (peer(&self.table().out, p.local_rank) as *const f32, peer(&self.table().out, lr) as *mut f32);
        let vecs = cols / 4; // n is a multiple of 8: rows are whole 16-byte vectors
        let mut i = t;
        while i < rows * vecs {
            let (r, v) = (div_nz(i, vecs), rem_nz(i, vecs));
            let off = ((row0 + r) * n + col0 + 4 * v) as usize;
            st_global_v4_u32(dst.add(off) as *mut [u32; 4], ld_global_v4_u32(src.add(off) as *const [u32; 4]));
            i += 128;
        }
    }

    /// Pull (helper thread) source `s`'s partial of this warpgroup's half of my tile `slot` from
    /// its outbox entry for block `block` over NVLink into my inbox slot for it (`inbox`: the
    /// source's inbox index), through the staging tile `c` (free: the previous tile's copies are
    /// done with it, and the consumers rewrite it only after the helper's next `free`), once the
    /// source's flag says it is there. `load` numbers this load on the `loaded` barrier.
    ///
    /// # Safety
    /// The helper thread, between its tile's `staged` wait (or the start of `help`) and its next
    /// `free`; `s` is a local rank whose outbox entry for `block` this launch fills.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    unsafe fn pull_one(&self, h: Handoff, c: u32, s: u32, inbox: u32, block: u32, slot: u32, cwg: u32, load: u32) {
        let p = self.p;
        let _ = self.wait_flag(p.part_flag(inbox, slot, cwg), slot);
        self.load_half(h, c, peer(&self.table().staging, s) + p.outbox_offset(block, slot, cwg), slot, load);
        bulk_store(p.staging + p.slot_offset(inbox, slot, cwg), c, HALF_TILE_BYTES);
        bulk_commit_group();
        bulk_wait_group_read::<0>();
    }

    /// Load (helper thread) the half tile at `src` into the staging tile `c` as load `load` on
    /// the `loaded` barrier, and wait until it is in.
    ///
    /// # Safety
    /// The helper thread, while the staging tile is its own (as for [`Self::pull_one`]); `src`
    /// holds a half tile that nobody writes until the helper's tile is done.
    #[inline(always)]
    unsafe fn load_half(&self, h: Handoff, c: u32, src: u64, slot: u32, load: u32) {
        // The half tile was written through the async proxy (or over NVLink) and flagged: read
        // it through the async proxy after the flag's acquire.
        fence_proxy_async_global();
        mbarrier_arrive_expect_tx(h.loaded(), HALF_TILE_BYTES);
        bulk_load(c, src, HALF_TILE_BYTES, h.loaded());
        let _ = self.bound().mbarrier(h.loaded(), load & 1, slot, WAIT_MBAR_HANDOFF);
    }

    /// Phases of the `loaded` barrier per tile ([`Self::skip_loads`]): the `count - 1` partials
    /// of an own tile ([`Self::sources`]' count), and with [`GemmRsParams::pull_reduced`] the
    /// other local ranks' reduced tiles.
    #[inline(always)]
    fn loads_per_tile(&self) -> u32 {
        let (_, count, _) = self.sources(0);
        (count - 1) + if self.p.pull_reduced != 0 { self.p.local_world - 1 } else { 0 }
    }

    /// Load (helper thread) this warpgroup's half of block tile `tile` through the bf16 output
    /// map `map` (another local rank's output over NVLink) into the staging tile `c` as load
    /// `load` on the `loaded` barrier, box by box ([`half_tile_boxes`], the boxes
    /// [`tma_store_tile`] stores), and wait until it is in.
    ///
    /// # Safety
    /// The helper thread, while the staging tile is its own; the half tile behind `map` is
    /// flagged and nobody writes it until this launch ends.
    #[inline(always)]
    unsafe fn load_tile(&self, h: Handoff, c: u32, map: u64, tile: Tile, cwg: u32, load: u32) {
        let (m0, n0, boxes) = half_tile_boxes::<Acc256>(self.p.rows, self.p.gemm.n, tile, cwg);
        // Stored through the async proxy and flagged: read through it after the acquire. A box
        // counts whole, edges zero-filled.
        fence_proxy_async_global();
        mbarrier_arrive_expect_tx(h.loaded(), boxes * 64 * SW128_ROW_BYTES);
        for j in 0..boxes {
            tma_load_2d(c + j * 64 * SW128_ROW_BYTES, map, h.loaded(), (n0 + 64 * j) as i32, m0 as i32);
        }
        let _ = self.bound().mbarrier(h.loaded(), load & 1, tile.index, WAIT_MBAR_HANDOFF);
    }

    /// Arrive `k` times on the `loaded` barrier without loading (helper thread): every tile a
    /// helper handles accounts for [`Self::loads_per_tile`] phases of it, loading or not, so that
    /// load `j` of its `n`-th tile waits on parity `(n * loads_per_tile + j) & 1`.
    #[inline(always)]
    unsafe fn skip_loads(h: Handoff, k: u32) {
        for _ in 0..k {
            mbarrier_arrive(h.loaded());
        }
    }

    /// Pull (helper thread) every other source's partial of this warpgroup's half of my tile
    /// `slot` of block `q` into my inbox ([`Self::pull_one`]), `n` being this helper's tile count.
    ///
    /// # Safety
    /// The helper thread of my own tile `slot` of block `q`, the `n`-th tile it helps, before it
    /// arrives `free`.
    #[inline(always)]
    unsafe fn pull_partials(&self, h: Handoff, c: u32, q: u32, slot: u32, n: u32, cwg: u32) {
        let p = self.p;
        let (base, count, me) = self.sources(q);
        // One node: my own block, sources' local ranks offset by my node's first rank (0).
        let (block, first_rank) = if NODES { (q, 0) } else { (p.rank, p.rank - p.local_rank) };
        // Sources from the next rank on, so that owners starting a tile together do not all
        // read from the same source first.
        for k in 0..count - 1 {
            let s = rem_nz(me + 1 + k, count);
            self.pull_one(h, c, s - first_rank, base + s, block, slot, cwg, n * self.loads_per_tile() + k);
        }
        // Written through the async proxy, read by the consumers' ordinary loads.
        bulk_wait_group::<0>();
        fence_proxy_async_global();
    }

    /// Prefetch (helper thread of a send tile of block `q`, one node, [`GemmRsParams::prefetch`]):
    /// q computes its partial of my tile `slot` in the same round as mine of its tile; pull it
    /// into my inbox now and raise my `pref` flag for it, which my own tile `slot` waits for.
    /// The staging tile is free: this tile's send read it, the consumers rewrite it after `free`.
    ///
    /// # Safety
    /// The helper thread of a one-node launch with [`GemmRsParams::prefetches`], right after its
    /// send of block `q`'s tile `slot` completed, as the `n`-th tile it helps.
    #[inline(always)]
    unsafe fn prefetch(&self, h: Handoff, c: u32, q: u32, slot: u32, n: u32, cwg: u32) {
        let p = self.p;
        let count = p.world;
        // This tile's loads on the `loaded` barrier: count - 1 of them, this one last.
        Self::skip_loads(h, count - 2);
        self.pull_one(h, c, q - (p.rank - p.local_rank), q, p.rank, slot, cwg, n * self.loads_per_tile() + count - 2);
        bulk_wait_group::<0>();
        fence_proxy_async_global();
        signal_gpu((p.flags as *mut u32).add(p.pref_flag(q, slot, cwg) as usize), epoch());
    }

    /// f32 output of my tile of block q: from registers into my block (one shot: block q of my
    /// output), and with a two-phase `all_reduce` copied into every other local rank's block and
    /// flagged there, all by the consumers.
    #[inline(always)]
    unsafe fn store_own_f32(&self, sum: &[f32; 128], block_tile: Tile, q: u32, slot: u32, cwg: u32, t: u32) {
        let p = self.p;
        let bar = 1 + cwg;
        let block = if ONE_SHOT { q } else { p.local_rank };
        store_f32(peer(&self.table().out, block) as *mut f32, p.rows, p.gemm.n, sum, block_tile, cwg, t);
        if p.all_reduce == 0 || ONE_SHOT {
            return;
        }
        if p.engines_copy_reduced(p.band_of(block_tile.m)) {
            // The copy engines copy the band into the others' outputs: every thread's stores,
            // then one release for all of them.
            fence_acq_rel_sys();
            named_barrier_sync(bar, 128);
            if t == 0 {
                self.publish_for_engines(p.done_flag(p.rank, slot, cwg), 1, p.band_of(block_tile.m));
            }
            return;
        }
        fence_acq_rel_cta();
        for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
            // Every thread writes: all wait for the receiver's readiness.
            if t == 0 {
                self.wait_ready(lr);
            }
            named_barrier_sync(bar, 128);
            self.copy_f32_rows(lr, block_tile, cwg, t);
        }
        // Every thread's stores, then one release for all of them.
        fence_acq_rel_sys();
        named_barrier_sync(bar, 128);
        if t == 0 {
            self.signal_others(p.done_flag(p.rank, slot, cwg));
        }
    }

    /// Several nodes, the helper of a tile this rank collects: put the node partial the
    /// consumers staged in `c` into my node-partial slot for half tile `item` of my `qi`-th
    /// collected block and raise my node flag for it (the inter-send and inter-reduce CTAs take
    /// it from there). The slot may still be the source of the last launch's FIFO WRITE: it is
    /// rewritten only once every destination entered this launch, which it did after receiving
    /// the last one.
    ///
    /// # Safety
    /// The helper thread of a several-node launch, after `staged` of a tile this rank collects.
    #[inline(always)]
    unsafe fn store_node_partial(&self, c: u32, qi: u32, item: u32) {
        let p = self.p;
        let (map, all_reduce) = (p.node_map(), p.is_all_reduce());
        for k in 0..map.dests(qi, all_reduce) {
            let d = map.dest(qi, k, all_reduce);
            let _ = self.wait_flag(GemmRsParams::ready_flag(d), d);
        }
        bulk_store(p.staging + p.node_offset(qi, map.node(), item), c, HALF_TILE_BYTES);
        bulk_commit_group();
        bulk_wait_group::<0>();
        signal((p.flags as *mut u32).add(p.node_flag(qi, map.node(), item) as usize), epoch());
    }
}

/// The one-shot all-reduce's parts (`ONE_SHOT` kernels only).
impl<const NODES: bool, const ONE_SHOT: bool> ReduceEpilogue<'_, NODES, ONE_SHOT> {
    /// One-shot: every source's partial of this warpgroup's half of block q's tile `slot`,
    /// summed into `acc` (overwritten) in the unfused reference's order, from zero: q's
    /// partial, then the others in rank order, each rounded to bf16, sums in fp32. Mine is in
    /// the staging tile `c` (the consumers just staged it), the others in my inbox (the helper
    /// saw their flags): every rank adds the same values in the same order, so all hold the
    /// same bits.
    #[inline(always)]
    unsafe fn sum_one_shot(&self, acc: &mut [f32; 128], q: u32, slot: u32, c: u32, cwg: u32, t: u32) {
        let p = self.p;
        for v in acc.iter_mut() {
            *v = 0.0;
        }
        for k in 0..p.world {
            // q first, then the others in rank order.
            let s = if k == 0 {
                q
            } else if k <= q {
                k - 1
            } else {
                k
            };
            if s == p.rank {
                macro_rules! add_mine {
                    ($j:expr) => {
                        add_chunk(acc, $j, ld_shared_v4_u32(c + (($j * 128 + t) * 16)))
                    };
                }
                unroll16!(add_mine);
            } else {
                let src = (p.staging + p.slot_offset(s, p.inbox_slot(q, slot), cwg)) as *const [u32; 4];
                macro_rules! add_theirs {
                    ($j:expr) => {
                        add_chunk(acc, $j, ld_global_v4_u32(src.add($j * 128 + t as usize)))
                    };
                }
                unroll16!(add_theirs);
            }
        }
    }

    /// One-shot helper: push my staged partial into every other local rank's inbox and flag
    /// it there, wait for every other rank's partial of the tile, let the consumers sum, then
    /// (bf16) TMA-store their sum into block q of my output.
    #[inline(always)]
    unsafe fn help_one_shot(&self, h: Handoff, c: u32, tile: Tile, n: u32, cwg: u32) {
        let p = self.p;
        let o = self.tiles.locate(tile.m, tile.n);
        let slot = p.inbox_slot(o.owner, o.slot);
        // The last tile's store read the staging tile (waited below).
        if n > 0 {
            mbarrier_arrive(h.free());
        }
        let _ = self.bound().mbarrier(h.staged(), 0, tile.index, WAIT_MBAR_HANDOFF);
        for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
            self.wait_ready(lr);
            bulk_store(peer(&self.table().staging, lr) + p.slot_offset(p.rank, slot, cwg), c, HALF_TILE_BYTES);
        }
        bulk_commit_group();
        bulk_wait_group::<0>();
        self.signal_others(p.part_flag(p.rank, slot, cwg));
        for s in 0..p.world {
            if s != p.rank {
                let _ = self.wait_flag(p.part_flag(s, slot, cwg), slot);
            }
        }
        mbarrier_arrive(h.ready());
        let _ = self.bound().mbarrier(h.staged(), 1, tile.index, WAIT_MBAR_HANDOFF);
        if p.gemm.out_f32 == 0 {
            let block_tile = Tile { index: tile.index, m: o.tm, n: o.tn };
            tma_store_tile(p.out_maps + 128 * o.owner as u64, c, p.rows, p.gemm.n, block_tile, cwg);
            bulk_wait_group_read::<0>();
        }
    }
}

impl<const NODES: bool, const ONE_SHOT: bool> Epilogue for ReduceEpilogue<'_, NODES, ONE_SHOT> {
    const HELPER: bool = true;

    #[inline(always)]
    unsafe fn init<const ST: u32>(&self, smem: &Smem<ST>) {
        Handoff::of(smem, 0).init();
        Handoff::of(smem, 1).init();
    }

    #[inline(always)]
    unsafe fn store<const ST: u32>(&self, smem: &Smem<ST>, acc: &mut [f32; 128], tile: Tile, n: u32, cwg: u32, t: u32) {
        let p = self.p;
        let h = Handoff::of(smem, cwg);
        let bar = 1 + cwg;
        let c = smem.c(cwg);
        let o = self.tiles.locate(tile.m, tile.n);
        let one_shot = !NODES && ONE_SHOT;
        // Several nodes: a collected tile's sum is a node partial, staged like a send.
        let own = one_shot || self.sums(o.owner);
        // A failed wait already reported (the launch fails); going on keeps every thread moving.
        if one_shot {
            // My partial first, for the helper to push: `staged` completes twice per tile
            // (partial, then sum). The staging tile is free once the helper's store of the
            // previous tile's sum read it.
            if t == 0 && n > 0 {
                let _ = self.bound().mbarrier(h.free(), (n - 1) & 1, tile.index, WAIT_MBAR_HANDOFF);
            }
            named_barrier_sync(bar, 128);
            put_chunks(c, acc, t);
            fence_proxy_async_shared();
            named_barrier_sync(bar, 128);
            // Every thread arrives (`staged` counts 128): each releases its own stores, which
            // racecheck can follow (one thread's arrival after a named barrier it does not).
            mbarrier_arrive(h.staged());
        }
        if own {
            if t == 0 {
                let since = trace_clock();
                let _ = self.bound().mbarrier(h.ready(), n & 1, tile.index, WAIT_MBAR_HANDOFF);
                trace_waited(trace_ev::SUM_WAITED, tile.index, since);
            }
            named_barrier_sync(bar, 128);
            if one_shot {
                self.sum_one_shot(acc, o.owner, o.slot, c, cwg, t);
            } else {
                self.sum_partials(acc, o.owner, o.slot, c, cwg, t);
            }
        }
        if !NODES && own && p.gemm.out_f32 != 0 {
            let block_tile = Tile { index: tile.index, m: o.tm, n: o.tn };
            self.store_own_f32(acc, block_tile, o.owner, o.slot, cwg, t);
            // Every thread has read the staged partial before `staged`, after which the helper
            // may load the next tile's into the staging tile (the bf16 path meets the same
            // barrier before writing it).
            named_barrier_sync(bar, 128);
        } else {
            // The staging tile is free once the helper's copies of the previous tile read it
            // (one shot: every thread also read its part of my partial, whose pushes the helper
            // finished before `ready`).
            if t == 0 && n > 0 && !one_shot {
                let since = trace_clock();
                let _ = self.bound().mbarrier(h.free(), (n - 1) & 1, tile.index, WAIT_MBAR_HANDOFF);
                trace_waited(trace_ev::STAGE_WAITED, tile.index, since);
            }
            named_barrier_sync(bar, 128);
            if !NODES && own {
                write_bf16(c, acc, t);
            } else {
                put_chunks(c, acc, t);
            }
            fence_proxy_async_shared();
            named_barrier_sync(bar, 128);
        }
        // Every thread (see the one-shot arrival above).
        mbarrier_arrive(h.staged());
    }

    #[inline(always)]
    unsafe fn finish(&self, _cwg: u32) {}

    #[inline(always)]
    unsafe fn help<const ST: u32>(&self, smem: &Smem<ST>, tile: Tile, n: u32, cwg: u32) {
        let p = self.p;
        let h = Handoff::of(smem, cwg);
        let c = smem.c(cwg);
        if !NODES && ONE_SHOT {
            return self.help_one_shot(h, c, tile, n, cwg);
        }
        let o = self.tiles.locate(tile.m, tile.n);
        let own = self.sums(o.owner);
        let (base, count, me) = self.sources(o.owner);
        let pull = p.pulls();
        let prefetch = !NODES && p.prefetches();
        // Two phases: every tile accounts for `count - 1` phases of the `loaded` barrier (see
        // `skip_loads`) whatever moves the partials.
        let staged = self.staged_source();
        if own {
            if pull && !prefetch {
                // The last one pulled stays in the staging tile (`staged_source`).
                self.pull_partials(h, c, o.owner, o.slot, n, cwg);
            } else {
                // The partials are in my inbox once their flags are up: pushed by their sources,
                // or pulled by my send tiles' helpers half a launch ago (`prefetch`). The staged
                // source's goes into the staging tile, the others into L2, for the consumers'
                // sum.
                let since = trace_clock();
                for s in 0..count {
                    if s != me {
                        let i = base + s;
                        let flag = if prefetch { p.pref_flag(i, o.slot, cwg) } else { p.part_flag(i, o.slot, cwg) };
                        let _ = self.wait_flag(flag, o.slot);
                        if s != staged {
                            bulk_prefetch_l2(p.staging + p.slot_offset(i, o.slot, cwg), HALF_TILE_BYTES);
                        }
                    }
                }
                trace_waited(trace_ev::PARTIALS_WAITED, tile.index, since);
                if staged != u32::MAX {
                    // (`count > 1`: `staged_source`.)
                    let src = p.staging + p.slot_offset(base + staged, o.slot, cwg);
                    self.load_half(h, c, src, o.slot, n * self.loads_per_tile());
                    Self::skip_loads(h, count - 2);
                }
            }
        } else if (pull && !prefetch) || (!pull && staged != u32::MAX) {
            Self::skip_loads(h, count - 1); // a send tile pulls nothing
        }
        // `ready` before `free`: consumers that saw `free` of tile n - 1 (staging tile n) know
        // `ready` of tile n completed, so their parity wait on `ready` at tile n + 1 cannot be
        // met by tile n - 1's phase (they wait on `ready` only at tiles they sum).
        mbarrier_arrive(h.ready());
        // The previous tile's copies, and this tile's pulls through it, are done with the staging
        // tile.
        if n > 0 {
            mbarrier_arrive(h.free());
        }
        let _ = self.bound().mbarrier(h.staged(), n & 1, tile.index, WAIT_MBAR_HANDOFF);
        let since = trace_clock();
        if !own {
            // The rank of this node that sums the block: its owner, or (several nodes) its
            // collector, and this rank's inbox index there.
            let (lr, src) = if NODES {
                let map = p.node_map();
                (map.collector(o.owner), p.inbox(map.block_node(o.owner), p.local_rank))
            } else {
                (o.owner - (p.rank - p.local_rank), p.rank)
            };
            // The owner entered this launch: it is done with the previous launch's slots. With
            // the copy engines the store below is local, but this wait is still what lets their
            // copy of the band into the owner's inbox go (the band is counted after it).
            self.wait_ready(lr);
            if p.stagger_ns != 0 && n < 2 {
                // The first waves' sends leave at once otherwise (`GemmRsParams::stagger_ns`).
                let until = globaltimer_ns() + (block_idx_x_here() % 8) as u64 * p.stagger_ns as u64;
                while globaltimer_ns() < until {
                    nanosleep(256);
                }
            }
            let engines = !NODES && p.engines();
            let dst = if pull || engines {
                p.staging + p.outbox_offset(o.owner, o.slot, cwg)
            } else {
                peer(&self.table().staging, lr) + p.slot_offset(src, o.slot, cwg)
            };
            bulk_store(dst, c, HALF_TILE_BYTES);
            bulk_commit_group();
            bulk_wait_group::<0>();
            if engines {
                // The owner's engine stream copies the band once it is whole (`ready` above
                // was its entry into this launch).
                self.publish_for_engines(p.part_mirror(o.owner, o.slot, cwg), 0, p.band_of(o.tm));
            } else {
                self.signal_peer(lr, p.part_flag(src, o.slot, cwg));
            }
            trace_waited(trace_ev::PARTIAL_SENT, tile.index, since);
            if prefetch {
                self.prefetch(h, c, o.owner, o.slot, n, cwg);
            }
            if p.pull_reduced != 0 {
                Self::skip_loads(h, p.local_world - 1); // nor pulls a reduced tile
            }
        } else if NODES {
            // The tile's index in its block's walk names its node-partial slot.
            let t = self.tiles;
            let local = TileGrid { m_tiles: t.m_tiles, n_tiles: t.n_tiles, group_m: t.group_m }.index_of(o.tm, o.tn);
            self.store_node_partial(c, p.node_map().block_node(o.owner), 2 * local + cwg);
        } else if p.gemm.out_f32 == 0 {
            let block_tile = Tile { index: tile.index, m: o.tm, n: o.tn };
            tma_store_tile(p.out_maps + 128 * p.local_rank as u64, c, p.rows, p.gemm.n, block_tile, cwg);
            if p.pull_reduced != 0 {
                // Mine is in my output for the others to pull; pull theirs of the same tile,
                // which they sum in the same round.
                bulk_wait_group::<0>();
                self.signal_others(p.done_flag(p.rank, o.slot, cwg));
                let first = n * self.loads_per_tile() + count - 1;
                for (i, lr) in peers_from_next(p.local_rank, p.local_world) {
                    let _ = self.wait_flag(p.done_flag(p.rank - p.local_rank + lr, o.slot, cwg), o.slot);
                    let theirs = p.out_maps + 128 * (MAX_LOCAL_RANKS as u32 + lr) as u64;
                    self.load_tile(h, c, theirs, block_tile, cwg, first + i - 1);
                    // Read: nobody needs it from their output any more.
                    self.signal_peer(lr, p.ack_flag(p.rank, o.slot, cwg));
                    let into_mine = p.out_maps + 128 * (2 * MAX_LOCAL_RANKS as u32 + lr) as u64;
                    tma_store_tile(into_mine, c, p.rows, p.gemm.n, block_tile, cwg);
                    bulk_wait_group_read::<0>();
                }
            } else if p.all_reduce != 0 && p.engines_copy_reduced(p.band_of(o.tm)) {
                // Every other rank sent me its partial of this tile: all entered this launch.
                bulk_wait_group::<0>();
                self.publish_for_engines(p.done_flag(p.rank, o.slot, cwg), 1, p.band_of(o.tm));
            } else if p.all_reduce != 0 {
                for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
                    self.wait_ready(lr);
                    tma_store_tile(p.out_maps + 128 * lr as u64, c, p.rows, p.gemm.n, block_tile, cwg);
                }
                bulk_wait_group::<0>();
                self.signal_others(p.done_flag(p.rank, o.slot, cwg));
            } else {
                bulk_wait_group_read::<0>();
            }
        }
    }

    #[inline(always)]
    unsafe fn help_finish(&self, cwg: u32) {
        bulk_wait_group::<0>();
        let p = self.p;
        // One-shot: every block of my output is my own work.
        if p.all_reduce == 0 || ONE_SHOT {
            return;
        }
        // All-reduce: the other owners' blocks of my output must be in before the launch ends;
        // each helper of the grid waits for its share of them.
        let waiters = 2 * p.gemm.roles.compute;
        let me = 2 * block_idx_x_here() + cwg;
        let per = self.tiles.per_owner();
        let mut x = me;
        while x < p.world * per * 2 {
            let (q, rest) = (div_nz(x, 2 * per), rem_nz(x, 2 * per));
            // Several nodes: the blocks this rank finalises are its own inter-reduce CTAs'.
            // Pulling: every other rank acknowledged every tile of my block (it read my output).
            let flag = if p.pull_reduced != 0 {
                p.ack_flag(q, rest / 2, rest % 2)
            } else {
                p.done_flag(q, rest / 2, rest % 2)
            };
            if !self.sums(q) && self.wait_flag(flag, rest / 2).is_err() {
                return;
            }
            x += waiters;
        }
    }
}

/// Thread 0 of every CTA: this launch's epoch (also put where [`epoch`] reads it); CTA 0 also
/// tells this node's other ranks that this rank entered the launch.
///
/// # Safety
/// Launched as the kernels of this module are, with `p` valid.
#[inline(always)]
pub(super) unsafe fn enter(p: &GemmRsParams) -> u32 {
    let epoch = launch_epoch(p.launches as *mut u64, p.gemm.roles.total());
    st_shared_u32(dyn_smem_base() + SCRATCH_OFF, epoch);
    if trace::ON {
        trace::start(epoch, p.gemm.roles.role_of(block_idx_x()), p.rank);
    }
    if block_idx_x() == 0 {
        for lr in 0..p.local_world {
            if lr != p.local_rank {
                let table = &*(p.peers as *const PeerTable);
                let flag = (peer(&table.flags, lr) as *mut u32).add(GemmRsParams::ready_flag(p.rank) as usize);
                signal(flag, epoch);
            }
        }
    }
    epoch
}

/// A compute CTA (all its threads): the engine over `tiles`, walked by `sched` (one node: the
/// same [`OwnerTiles`]), with the [`ReduceEpilogue`].
///
/// # Safety
/// Launched as the kernels of this module are, with `p` valid; `NODES` only with several nodes.
#[inline(always)]
pub(super) unsafe fn compute<
    const TRANS_B: u32,
    const NODES: bool,
    const ONE_SHOT: bool,
    S: crate::sched::TileScheduler,
>(
    p: &GemmRsParams,
    tiles: OwnerTiles,
    sched: &S,
) {
    const { assert!(!(NODES && ONE_SHOT), "the one-shot all-reduce is one node's") };
    let g = &p.gemm;
    let ops = Operands::of(g, TILE_M);
    let bound = Bound { timeout_ns: g.timeout_ns, diag: &g.diag, rank: p.rank, role: Role::Compute as u32 };
    let gate = OwnerRows { p, tiles };
    let epi = ReduceEpilogue::<NODES, ONE_SHOT> { p, tiles };
    compute_cta::<TRANS_B, STAGES, Acc256, _, _, _>(&ops, sched, &gate, &epi, g.roles.compute, bound);
}

/// The one-node kernels: compute CTAs only; `ONE_SHOT` (with `p.one_shot`): the one-shot
/// all-reduce.
///
/// # Safety
/// Launched with `THREADS` threads and `SMEM_BYTES` of dynamic shared memory per CTA, every CTA
/// of the grid resident at once, `p` as the host plans it (`ops::gemm_rs`).
#[inline(always)]
unsafe fn one_node<const TRANS_B: u32, const ONE_SHOT: bool>(p: &GemmRsParams) {
    if thread_idx_x() == 0 {
        enter(p);
    }
    if block_idx_x() >= p.gemm.roles.compute {
        return;
    }
    let g = &p.gemm;
    // One-shot: every rank walks the same order (rank 0's), so the partials of a tile are
    // produced at about the same time everywhere and no sum waits long for one.
    let walker = if ONE_SHOT { 0 } else { p.rank };
    let tiles =
        OwnerTiles::new(p.rows, g.n, (TILE_M, TILE_N), g.group_m, p.world, walker, p.lead).rotated(g.roles.compute);
    compute::<TRANS_B, false, ONE_SHOT, _>(p, tiles, &tiles);
    if trace::ON {
        // Every warp read the epoch past the engine's first block barrier.
        trace::warp_done(epoch());
    }
}

/// GEMM + ReduceScatter / AllReduce in two phases, one node.
///
/// # Safety
/// As for [`one_node`].
#[inline(always)]
unsafe fn gemm_rs<const TRANS_B: u32>(p: &GemmRsParams) {
    one_node::<TRANS_B, false>(p);
}

/// GEMM + AllReduce in one shot, one node.
///
/// # Safety
/// As for [`one_node`].
#[inline(always)]
unsafe fn gemm_ar_one_shot<const TRANS_B: u32>(p: &GemmRsParams) {
    one_node::<TRANS_B, true>(p);
}

b_layout_entry_points! {
    GemmRsParams => gemm_rs;
    /// GEMM + ReduceScatter / AllReduce with B `[K/W, N]` row-major, one node.
    kn: mk_gemm_rs_kn;
    /// GEMM + ReduceScatter / AllReduce with B `[N, K/W]` row-major, one node.
    nk: mk_gemm_rs_nk
}

b_layout_entry_points! {
    GemmRsParams => gemm_ar_one_shot;
    /// GEMM + AllReduce in one shot with B `[K/W, N]` row-major, one node.
    kn: mk_gemm_ar_one_shot_kn;
    /// GEMM + AllReduce in one shot with B `[N, K/W]` row-major, one node.
    nk: mk_gemm_ar_one_shot_nk
}
