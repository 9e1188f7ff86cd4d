//! AllGather + GEMM in one persistent launch: `C = allgather(A) @ B`, written from the framework's
//! pieces (see [`AgGemmParams`] for the data and flag layout):
//! - compute CTAs: the GEMM engine with a [`RowOrder`] scheduler (tile rows in the host's
//!   `row_order`: local rows first, then in arrival order), the [`ArrivalGate`] (before a tile's
//!   loads the producer waits for the arrival flags of exactly the chunks of rows it reads) and
//!   the local-store epilogue;
//! - push CTAs (intra-comm): copy this rank's shard, chunk by chunk, into every local peer's
//!   `gathered` over NVLink (and into its own, unless in place), raising the peer's chunk flag;
//!   with `spread` only every `spread_push_every`-th chunk, the spare warps of every
//!   `spread_every`-th compute CTA copying the rest ([`spread`]);
//! - forward CTAs (intra-comm, several nodes): copy chunks that arrived from other nodes on to the
//!   node's other ranks;
//! - one inter-send CTA (several nodes): pushes the shard through the FIFO to this rank's
//!   counterpart on every other node (same local rank); the proxy writes data, then flag.
//!
//! With `engines` there are no push CTAs: the copy engines copy the shard on a side stream between
//! one-CTA launches of [`mk_ag_gemm_engine`] (`ready` raised and awaited, then each piece's
//! chunk flags), and the tiles wait on the same flags.
//!
//! Before writing into a rank's `gathered`, a writer waits for that rank's `ready` flag of this
//! launch: the rank has entered the launch, so everything it did before (the previous launch, the
//! caller's reads of the gathered A) is finished. The epoch comes from the launch counter, so
//! back-to-back launches and CUDA-graph replays need no reset.
use crate::abi::*;
use crate::arch::*;
use crate::comm::nvlink::{copy_block, copy_fan, lsu_fan, BulkRing};
use crate::comm::signal::{last_arriver_reset, launch_epoch, signal};
use crate::comm::{fifo_push, fifo_quiet, next_peer, peers_from_next, signal_remote};
use crate::gemm::engine::{compute_cta, Operands};
use crate::gemm::feed::Feed;
use crate::gemm::*;
use crate::sched::{
    div_nz, rem_nz, ACopy, Claimed, GaveUp, InputGate, KSplit, Role, RowOrder, TailSplit, Tile, TileGrid,
    TileScheduler, SIDE_THREADS,
};
use crate::sync::{stop, Bound};
use crate::{abi::trace as trace_ev, trace};

/// The compute CTAs' input gate: a tile waits for the arrival flags of exactly the chunks of rows
/// it reads (its order is `row_order`'s grouped raster, a [`RowOrder`]).
pub struct ArrivalGate<'a> {
    p: &'a AgGemmParams,
    epoch: u32,
}

impl InputGate for ArrivalGate<'_> {
    #[inline(always)]
    fn trace_epoch(&self) -> u32 {
        self.epoch
    }

    #[inline(always)]
    unsafe fn wait(&self, tile: Tile) -> Result<(), GaveUp> {
        let p = self.p;
        if p.tile_is_local(tile.m, TILE_M) {
            return Ok(()); // read from the caller's shard itself
        }
        let bound =
            Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: Role::Compute as u32 };
        let m = p.gemm.m;
        let first = tile.m * TILE_M;
        let end = if first + TILE_M < m { first + TILE_M } else { m };
        let mut row = first;
        let mut result = Ok(());
        while row < end {
            let s = div_nz(row, p.shard_rows);
            let c = div_nz(row - s * p.shard_rows, p.chunk_rows);
            if !(s == p.rank && p.in_place != 0) {
                let flag = (p.flags as *const u32).add(p.data_flag(s, c) as usize);
                if bound.flag(flag, self.epoch, tile.index).is_err() {
                    result = Err(GaveUp);
                    break;
                }
            }
            row = s * p.shard_rows + p.chunk_rows_range(c).1;
        }
        // The rows were written by other agents (peers' bulk copies, the proxy's NIC); the TMA
        // loads that follow read them through the async proxy.
        fence_proxy_async_global();
        result
    }

    const WRITES_A: bool = true;
    // The producer thread draws its tiles from the counter, and the gate's row walk needs
    // registers of its own; the consumers fit 224.
    const WIDE_PRODUCER: bool = true;
    const SIDE: bool = true;

    #[inline(always)]
    unsafe fn side(&self, smem: u32, t: u32) {
        let p = self.p;
        // Read here, not kept from the kernel's start: live across `setmaxnreg` it spills.
        let cta = block_idx_x_here();
        // Intra-comm CTAs that join the tiles (`join`) have copied already.
        if p.spread != 0 && cta < p.gemm.roles.compute {
            let b =
                Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: Role::IntraComm as u32 };
            spread(p, ld_shared_u32(dyn_smem_base() + EPOCH_WORD), smem, (cta, t), &b);
        }
    }

    #[inline(always)]
    fn a_copy(&self, tile: Tile, tile_m: u32) -> Option<ACopy> {
        let p = self.p;
        // Every tile of a local tile row writes its share of the row's k-blocks (one SM alone
        // writes too slowly).
        let (first, stride) = p.local_copy_share(tile.m, tile.n, tile_m, TILE_N)?;
        Some(ACopy { map: p.gemm.a_map, row: tile.m * tile_m, first, stride })
    }

    #[inline(always)]
    fn a_source(&self, tile: Tile, a_map: u64, tile_m: u32) -> (u64, u32) {
        let p = self.p;
        if p.tile_is_local(tile.m, tile_m) {
            (p.a_local_map, tile.m * tile_m - p.rank * p.shard_rows)
        } else {
            (a_map, tile.m * tile_m)
        }
    }
}

/// Where thread 0 of every CTA leaves the launch's epoch for a compute CTA's side threads (and
/// the comm-only launch's [`wait_all`]): the
/// engine's last scratch word (split-K's last-arriver words are the two before it; a comm CTA's
/// ring ends before the scratch).
const EPOCH_WORD: u32 = SCRATCH_OFF + 12;

/// Tell this node's other ranks that this rank entered the launch (their writes into it may
/// begin).
#[inline(always)]
unsafe fn raise_ready(p: &AgGemmParams, epoch: u32) {
    for lr in 0..p.local_world {
        if lr != p.local_rank {
            signal((pick(&p.peer_flags, lr) as *mut u32).add(AgGemmParams::ready_flag(p.rank) as usize), epoch);
        }
    }
}

/// Wait (one thread, each wait bounded) for every other local rank's `ready` of this launch, in
/// ring order; false once a wait gave up (reported; the later ones are not waited for).
#[inline(always)]
unsafe fn peers_ready(p: &AgGemmParams, epoch: u32, b: &Bound) -> bool {
    let flags = p.flags as *const u32;
    for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
        let rank = p.rank - p.local_rank + lr;
        if b.flag(flags.add(AgGemmParams::ready_flag(rank) as usize), epoch, rank).is_err() {
            return false;
        }
    }
    true
}

/// Named barrier of the side threads ([`SIDE_THREADS`]; the consumers' epilogues use 1 and 2).
const SIDE_BARRIER: u32 = 10;

/// With `spread`, side thread `t` (of [`SIDE_THREADS`], the producer warpgroup's spare warps) of
/// every `spread_every`-th compute CTA: its units of this rank's shard (chunk-major over the
/// chunks the push CTAs leave, [`AgGemmParams::spread_unit_range`]) into every local rank's
/// `gathered` (this rank's first unless in place), with 16-byte loads and stores: the SM's TMA
/// unit stays the GEMM's (bulk copies from a compute CTA stalled its loads behind the NVLink
/// writes: 1.2-1.45x the GEMM alone on 4x H200 against 1.06-1.14x this way). The last unit of
/// a chunk to land raises the chunk's flag on each place.
#[inline(always)]
unsafe fn spread(p: &AgGemmParams, epoch: u32, smem: u32, (cta, t): (u32, u32), b: &Bound) {
    let lw = p.local_world;
    let own = (p.in_place == 0) as u32;
    let places = lw - 1 + own;
    // Place 0 is this rank (unless in place), then the ranks after it. Where each place's
    // shard and flags are goes to shared memory (two tables of 8), then a verdict word: picked
    // from the parameters inside the copy loop, the addresses would be held in registers the
    // producer warpgroup lacks.
    let verdict = smem + 128;
    if t == 0 {
        if cta == 0 {
            raise_ready(p, epoch);
        }
        // A failure is reported; the waiting tiles report too, and the launch ends.
        let ok = peers_ready(p, epoch, b);
        for k in 0..places {
            let lr = next_peer(p.local_rank, lw, k + 1 - own);
            let local = lr == p.local_rank;
            let to = if local { p.gathered } else { pick(&p.peer_gathered, lr) };
            st_shared_u64(smem + 8 * k, to + p.shard_offset(p.rank));
            st_shared_u64(smem + 64 + 8 * k, if local { p.flags } else { pick(&p.peer_flags, lr) });
        }
        st_shared_u32(verdict, ok as u32);
    }
    named_barrier_sync(SIDE_BARRIER, SIDE_THREADS);
    // Nothing to copy when alone on the node in place: the proxy sends from the shard itself.
    if ld_shared_u32(verdict) == 0 || places == 0 {
        return;
    }
    let (every, units, step) = (p.spread_every, p.spread_units(), p.spread_ctas);
    // `every` is at least 1 (the host's rule).
    let mut u = if rem_nz(cta, every) == 0 { div_nz(cta, every) } else { units };
    while u < units {
        let (c, lo, hi) = p.spread_unit_range(u);
        lsu_fan::<4>(p.shard_src, (places, |k| ld_shared_u64(smem + 8 * k)), (lo, hi), t, SIDE_THREADS);
        // Every side thread's stores issued; thread 0's system-scope fence then covers them.
        named_barrier_sync(SIDE_BARRIER, SIDE_THREADS);
        if opaque_u32(t) == 0
            && last_arriver_reset(
                (p.spread_counters as *mut u32).add((c * FLAG_STRIDE) as usize),
                p.spread_chunk_units(c),
            )
        {
            for k in 0..places {
                let flags = ld_shared_u64(smem + 64 + 8 * k) as *mut u32;
                signal(flags.add(p.data_flag(p.rank, c) as usize), epoch);
            }
        }
        u += step;
    }
    // Tested afresh, not kept from the start: a predicate live across the loop spills.
    if p.comm_only != 0 && block_idx_x_here() == 0 {
        wait_all(p, epoch, b, (t, SIDE_THREADS));
    }
}

/// Shared-memory base of a comm CTA's bulk-copy ring (its whole dynamic shared memory).
#[inline(always)]
fn ring_base() -> u32 {
    dyn_smem_base()
}

/// One NVLink copy item of a comm CTA: chunk `chunk` of rank `src_rank`'s shard, read from `from`
/// (where that shard starts), into local rank `peer`'s `gathered`, then `data[src_rank][chunk]`
/// raised there.
struct Item {
    from: u64,
    src_rank: u32,
    chunk: u32,
    peer: u32,
}

/// A comm CTA's walk over its items: waits for the target's `ready` flag the first time, copies
/// with the whole CTA, and raises the chunk's flag on the target.
struct Mover<'a> {
    p: &'a AgGemmParams,
    epoch: u32,
    b: Bound<'a>,
    ring: Option<BulkRing>,
    ready_seen: u32,
    tid: u32,
    failed: bool,
}

impl Mover<'_> {
    #[inline(always)]
    unsafe fn wait_ready(&mut self, lr: u32) {
        if self.tid == 0 && !self.failed && self.ready_seen & (1 << lr) == 0 {
            let rank = self.p.rank - self.p.local_rank + lr;
            let flag = (self.p.flags as *const u32).add(AgGemmParams::ready_flag(rank) as usize);
            self.failed = self.b.flag(flag, self.epoch, rank).is_err();
            self.ready_seen |= 1 << lr;
        }
    }

    #[inline(always)]
    unsafe fn run(&mut self, it: Item) {
        let p = self.p;
        let local = it.peer == p.local_rank;
        if !local {
            self.wait_ready(it.peer);
            sync_threads(); // nobody writes into the peer before thread 0 saw it ready
        }
        let (lo, hi) = p.chunk_bytes_range(it.chunk);
        let to = if local { p.gathered } else { pick(&p.peer_gathered, it.peer) };
        let dst = to + p.shard_offset(it.src_rank);
        // The compute tiles may write most of the local copy themselves (`local_copy_parts`).
        let [before, after] = if local { p.local_copy_parts(it.chunk, TILE_M) } else { [(lo, hi), (hi, hi)] };
        let mut ok = true;
        let mut part = |range: (u64, u64)| {
            if range.1 > range.0 {
                // A thread-0 failure is not seen by the others: they keep copying (harmlessly)
                // and meet the block barriers; thread 0 raises nothing more.
                let ring = if self.failed || !ok { None } else { self.ring.as_mut() };
                let tb = (self.tid, block_dim_x());
                ok &= copy_block(it.from, dst, range, true, ring, &self.b, it.chunk, tb);
            }
        };
        part(before);
        part(after);
        if self.tid == 0 && ok && !self.failed {
            let flags = if local { p.flags } else { pick(&p.peer_flags, it.peer) };
            signal((flags as *mut u32).add(p.data_flag(it.src_rank, it.chunk) as usize), self.epoch);
        }
        self.failed |= !ok;
    }

    /// Chunk `chunk` of this rank's shard into every other local rank's `gathered` at once
    /// ([`copy_fan`]: each piece loaded once), then the chunk's flag raised on each.
    #[inline(always)]
    unsafe fn fan(&mut self, chunk: u32) {
        let p = self.p;
        for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
            self.wait_ready(lr);
        }
        sync_threads(); // nobody writes into a peer before thread 0 saw it ready
        let peer = |k: u32| next_peer(p.local_rank, p.local_world, 1 + k);
        let places = (p.local_world - 1, |k| pick(&p.peer_gathered, peer(k)) + p.shard_offset(p.rank));
        let ring = if self.failed { None } else { self.ring.as_mut() };
        let tb = (self.tid, block_dim_x());
        let ok = copy_fan(p.shard_src, places, p.chunk_bytes_range(chunk), true, ring, &self.b, chunk, tb);
        if self.tid == 0 && ok && !self.failed {
            for k in 0..places.0 {
                let flags = pick(&p.peer_flags, peer(k)) as *mut u32;
                signal(flags.add(p.data_flag(p.rank, chunk) as usize), self.epoch);
            }
        }
        self.failed |= !ok;
    }
}

/// Push CTA `idx` of `ctas`: one item per chunk and other local rank, chunk-major, starting with
/// the next rank (with `fan`, one item per chunk for all of them); and, unless in place, one
/// local copy per chunk into this rank's own `gathered`: after all pushes (`local_copy_last`),
/// or before each chunk's pushes.
#[inline(always)]
unsafe fn push(p: &AgGemmParams, mv: &mut Mover, idx: u32, ctas: u32) {
    let own = (p.in_place == 0) as u32;
    let peers = if p.fan != 0 { (p.local_world > 1) as u32 } else { p.local_world - 1 };
    let per_chunk = own + peers;
    let chunks = p.pushed_chunks();
    let mut i = idx;
    while i < chunks * per_chunk {
        let (c, j) = if p.local_copy_last != 0 {
            if i < chunks * peers {
                (div_nz(i, peers), 1 + rem_nz(i, peers))
            } else {
                (i - chunks * peers, 0)
            }
        } else {
            (div_nz(i, per_chunk), rem_nz(i, per_chunk) + 1 - own)
        };
        let c = p.pushed_chunk(c);
        // j = 0: the local copy; j = 1..: the j-th rank after this one (with `fan`, all of them).
        if j > 0 && p.fan != 0 {
            mv.fan(c);
        } else {
            let peer = next_peer(p.local_rank, p.local_world, j);
            // Read from the caller's shard, not from our own copy of it: no wait on the local copy.
            mv.run(Item { from: p.shard_src, src_rank: p.rank, chunk: c, peer });
        }
        i += ctas;
    }
}

/// Forward CTA `idx` of `ctas`: chunks that arrived from this rank's counterparts on other nodes
/// go on to the node's other ranks, chunk-major.
#[inline(always)]
unsafe fn forward(p: &AgGemmParams, mv: &mut Mover, idx: u32, ctas: u32) {
    let nodes = div_nz(p.world, p.local_world);
    let my_node = div_nz(p.rank, p.local_world);
    let per_chunk = (nodes - 1) * (p.local_world - 1);
    let mut i = idx;
    while i < p.chunks * per_chunk {
        let (c, j) = (div_nz(i, per_chunk), rem_nz(i, per_chunk));
        let (n, k) = (div_nz(j, p.local_world - 1), rem_nz(j, p.local_world - 1));
        let node = if n >= my_node { n + 1 } else { n };
        let src = node * p.local_world + p.local_rank;
        if mv.tid == 0 && !mv.failed {
            let flag = (p.flags as *const u32).add(p.data_flag(src, c) as usize);
            mv.failed = mv.b.flag(flag, mv.epoch, src).is_err();
            if trace::ON && !mv.failed {
                trace::stamp(mv.epoch, trace_ev::CHUNK_SEEN, block_idx_x(), src, c);
            }
            fence_proxy_async_global();
        }
        sync_threads(); // the other threads copy only after thread 0 saw the chunk arrive
        let peer = next_peer(p.local_rank, p.local_world, 1 + k);
        mv.run(Item { from: p.gathered + p.shard_offset(src), src_rank: src, chunk: c, peer });
        i += ctas;
    }
}

/// The inter-send CTA's thread: tell every counterpart on another node that this rank entered
/// the launch, then push the shard to each, chunk-major, each WRITE raising the chunk's flag there.
#[inline(always)]
unsafe fn inter_send(p: &AgGemmParams, epoch: u32, b: &Bound) {
    let nodes = div_nz(p.world, p.local_world);
    let my_node = div_nz(p.rank, p.local_world);
    let counterpart = |n: u32| n * p.local_world + p.local_rank;
    let flag_loc = |idx: u32| FifoCmd::loc(BUF_HEAP, p.flags_heap_off + 4 * idx as u64);
    let push = |cmd: FifoCmd, to: u32| fifo_push(&p.fifo, cmd, b.timeout_ns, b.diag, b.site(to, WAIT_FLAG));
    for n in 0..nodes {
        if n == my_node {
            continue;
        }
        let q = counterpart(n);
        let ready = p.flags_heap_off + 4 * AgGemmParams::ready_flag(p.rank) as u64;
        if signal_remote(&p.fifo, q, ready, epoch, b).is_err() {
            return;
        }
    }
    let flags = p.flags as *const u32;
    let mut through = 0;
    for c in 0..p.chunks {
        if p.in_place == 0 && b.flag(flags.add(p.data_flag(p.rank, c) as usize), epoch, c).is_err() {
            return; // the FIFO's source is our heap copy of the shard: wait for the local copy
        }
        let (lo, hi) = p.chunk_bytes_range(c);
        let off = p.gathered_heap_off + p.shard_offset(p.rank) + lo;
        for n in 0..nodes {
            if n == my_node {
                continue;
            }
            let q = counterpart(n);
            if c == 0 && b.flag(flags.add(AgGemmParams::ready_flag(q) as usize), epoch, q).is_err() {
                return;
            }
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_WRITE, 1, q, 0),
                src: FifoCmd::loc(BUF_HEAP, off),
                dst: FifoCmd::loc(BUF_HEAP, off),
                bytes: hi - lo,
                flag: flag_loc(p.data_flag(p.rank, c)),
                flag_value: epoch as u64,
                ..Default::default()
            };
            match push(cmd, q) {
                Ok(ticket) => through = ticket + 1,
                Err(()) => return,
            }
        }
    }
    if trace::ON {
        trace::stamp(epoch, trace_ev::SENT, block_idx_x(), through as u32, 0);
    }
    // The WRITEs read the shard (in place, the caller's input): the launch ends after they did.
    let released = fifo_quiet(&p.fifo, through, b, p.rank).is_ok();
    if trace::ON && released {
        trace::stamp(epoch, trace_ev::RELEASED, block_idx_x(), through as u32, 0);
    }
}

/// All-gather alone: wait until every chunk this rank gathers has arrived, `nthreads` threads
/// sharing the flags out. One thread checking them in turn paid a system-scope load for every
/// flag it reached after the last arrival: about 0.1 ms of a 2 x 1 launch's 256 chunks per
/// source (docs/PERF.md, "The emulated link, traced").
#[inline(always)]
unsafe fn wait_all(p: &AgGemmParams, epoch: u32, b: &Bound, (tid, nthreads): (u32, u32)) {
    let flags = p.flags as *const u32;
    let mut i = tid;
    while i < p.world * p.chunks {
        let (s, c) = (div_nz(i, p.chunks), rem_nz(i, p.chunks));
        if !(s == p.rank && p.in_place != 0) && b.flag(flags.add(p.data_flag(s, c) as usize), epoch, s).is_err() {
            return;
        }
        i += nthreads;
    }
}

/// The CTAs that claim tiles: the compute CTAs, and with `join` the intra-comm ones.
#[inline(always)]
fn claiming_ctas(p: &AgGemmParams) -> u32 {
    let roles = p.gemm.roles;
    roles.compute + if p.join != 0 { roles.intra_comm } else { 0 }
}

/// Run the GEMM engine on tiles claimed in `row_order`'s grouped raster (local rows first, then
/// arrival order), each waiting for exactly the chunks of rows it reads.
#[inline(always)]
unsafe fn compute<const TRANS_B: u32>(p: &AgGemmParams, epoch: u32, b: Bound<'_>) {
    let g = &p.gemm;
    let epi = TailStore {
        split: SplitKStore {
            inner: StoreC::of(g),
            sched: schedule(p),
            workspace: p.tail_workspace,
            counters: p.tail_counters,
            parallel: false,
            epoch: 0,
            // The launch counter also counts the all-gather-alone launches, which run no tile.
            reset: true,
            bound: b,
        },
    };
    let gate = ArrivalGate { p, epoch };
    let ops = Operands::of(g, TILE_M);
    compute_cta::<TRANS_B, STAGES, Acc256, _, _, _>(&ops, &epi.split.sched, &gate, &epi, claiming_ctas(p), b);
}

/// The tiles in `row_order`'s grouped raster ([`RowOrder`]), claimed from `tile_counters`, or
/// walked statically, with `join` the intra-comm CTAs sharing the walk from `join_at` on; past
/// `tail_dp`, the tail's k-ranges ([`TailSplit`]): a last partial wave's, or the arrival tail's
/// (`tail_rows`).
#[inline(always)]
fn schedule(p: &AgGemmParams) -> Walk<'_> {
    Walk(p)
}

/// The launch's [`TailSplit`] walk, rebuilt from the parameters at each use (as [`Rows`]).
#[derive(Clone, Copy)]
struct Walk<'a>(&'a AgGemmParams);

impl<'a> Walk<'a> {
    #[inline(always)]
    fn split(&self) -> TailSplit<Claimed<Rows<'a>>> {
        let p = self.0;
        let counters = if p.dynamic != 0 { p.tile_counters as *mut u32 } else { core::ptr::null_mut() };
        let join = if p.join != 0 && p.dynamic == 0 { (p.join_at, p.gemm.roles.compute) } else { (u32::MAX, 0) };
        let walk = Claimed { inner: Rows(p), counters, ahead: p.claim_ahead, join };
        let k_blocks = p.gemm.k.div_ceil(TILE_K);
        // Recomputed here, not kept from the launch's start: a value live across the engine's
        // register reallocation spills in the joining CTAs. The arrival tail has its own count.
        let ctas = if p.tail_ranges != 0 { p.tail_ranges } else { opaque_u32(claiming_ctas(p)) };
        TailSplit::at(walk, Rows(p).order().grid, k_blocks, ctas, p.tail_dp)
    }
}

impl TileScheduler for Walk<'_> {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.split().count()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        self.split().tile(index)
    }
    #[inline(always)]
    fn k_range(&self, index: u32, k_blocks: u32) -> (u32, u32) {
        self.split().k_range(index, k_blocks)
    }
    const MAY_BE_EMPTY: bool = true;
    const DYNAMIC: bool = true;
    #[inline(always)]
    fn counters(&self) -> *mut u32 {
        self.split().counters()
    }
    #[inline(always)]
    fn claim_ahead(&self) -> u32 {
        self.split().claim_ahead()
    }
    #[inline(always)]
    fn static_join(&self) -> (u32, u32) {
        self.split().static_join()
    }
}

impl KSplit for Walk<'_> {
    #[inline(always)]
    fn slots(&self) -> u32 {
        self.split().slots()
    }
    #[inline(always)]
    fn unit(&self, index: u32) -> (u32, u32) {
        self.split().unit(index)
    }
    #[inline(always)]
    fn arrivals(&self, t: u32) -> u32 {
        self.split().arrivals(t)
    }
    #[inline(always)]
    fn whole(&self, index: u32) -> bool {
        index < self.0.tail_dp
    }
}

/// [`RowOrder`] over the launch's grid, rebuilt from the parameters at each use: the grid's
/// derived values held from the start would cost the producer thread a register it lacks.
#[derive(Clone, Copy)]
struct Rows<'a>(&'a AgGemmParams);

impl Rows<'_> {
    #[inline(always)]
    fn order(&self) -> RowOrder {
        let g = &self.0.gemm;
        RowOrder {
            grid: TileGrid::new(g.m, g.n, TILE_M, TILE_N, g.group_m),
            rows: self.0.row_order as *const u32,
            tail_rows: self.0.tail_rows,
        }
    }
}

impl TileScheduler for Rows<'_> {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.order().count()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        self.order().tile(index)
    }
}

// The ring's verdict word lies past the bulk-copy ring, in the engine's scratch words.
const _: () = assert!(crate::kernels_info::allgather::BULK_SMEM_BYTES <= SCRATCH_OFF);

#[inline(always)]
unsafe fn ag_gemm<const TRANS_B: u32>(p: &AgGemmParams) {
    let tid = thread_idx_x();
    let roles = p.gemm.roles;
    // Only thread 0 of a CTA waits on or raises flags, so only it needs the epoch.
    let epoch = if tid == 0 {
        let epoch = launch_epoch(p.launches as *mut u64, roles.total());
        // For a compute CTA's side threads (`spread`), read past the engine's first block
        // barrier; a word no other role's shared memory uses.
        st_shared_u32(dyn_smem_base() + EPOCH_WORD, epoch);
        epoch
    } else {
        0
    };
    let bound =
        |role: Role| Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: role as u32 };
    let role = roles.role_of(block_idx_x());
    if trace::ON && tid == 0 {
        trace::start(epoch, role, p.rank);
    }
    match role {
        Some((Role::Compute, _)) => compute::<TRANS_B>(p, epoch, bound(Role::Compute)),
        Some((Role::IntraComm, idx)) => {
            let ring = if tid == 0 { Some(BulkRing::new(ring_base())) } else { None };
            let b = bound(Role::IntraComm);
            let mut mv = Mover { p, epoch, b, ring, ready_seen: 0, tid, failed: false };
            let push_ctas = roles.intra_comm - p.fwd_ctas;
            if idx < push_ctas {
                // With the copy engines the side stream's launches raise `ready` and copy; a
                // comm-only launch's one push CTA only waits below.
                if p.engines == 0 {
                    if idx == 0 && tid == 0 {
                        raise_ready(p, epoch);
                    }
                    push(p, &mut mv, idx, push_ctas);
                }
                if idx == 0 && p.comm_only != 0 {
                    sync_threads(); // thread 0 stored the epoch at the launch's start
                    let epoch = ld_shared_u32(dyn_smem_base() + EPOCH_WORD);
                    wait_all(p, epoch, &b, (tid, block_dim_x()));
                }
            } else {
                forward(p, &mut mv, idx - push_ctas, p.fwd_ctas);
            }
            if p.join != 0 {
                // Copies done: claim tiles like the compute CTAs, unless a timed-out copy may
                // still land in the shared memory.
                if BulkRing::hand_over(mv.ring.take(), dyn_smem_base() + SCRATCH_OFF) {
                    compute::<TRANS_B>(p, epoch, bound(Role::Compute));
                } else if tid == 0 {
                    Feed::forfeit(&schedule(p), claiming_ctas(p));
                }
            }
        }
        Some((Role::InterSend, _)) if tid == 0 => inter_send(p, epoch, &bound(Role::InterSend)),
        _ => {}
    }
    if trace::ON {
        trace_end(p, role.map(|r| r.0), tid);
    }
}

/// The CTA's `END` stamp: its last warp's exit where the tiles ran (every warp read the epoch
/// past the engine's first block barrier), else thread 0's, after its copies or sends.
#[inline(always)]
unsafe fn trace_end(p: &AgGemmParams, role: Option<Role>, tid: u32) {
    let tiles = matches!(role, Some(Role::Compute)) || (matches!(role, Some(Role::IntraComm)) && p.join != 0);
    if tiles {
        trace::warp_done(ld_shared_u32(dyn_smem_base() + EPOCH_WORD));
    } else if tid == 0 {
        trace::stamp(ld_shared_u32(dyn_smem_base() + EPOCH_WORD), trace_ev::END, block_idx_x(), 0, 0);
    }
}

/// One step of the copy engines' gather ([`AgGemmParams::engines`], [`AgEngineParams`]), on
/// the op's side stream: enter (raise `ready` at every local peer, publish the epoch, wait for
/// theirs; a wait that gives up stops the context, so no copy queued behind runs), or flag a
/// piece the copy engines just copied (stream order) into `peer`'s `gathered`, a chunk per
/// thread.
#[inline(always)]
unsafe fn engine_step(e: &AgEngineParams) {
    let p = &e.ag;
    let tid = thread_idx_x();
    let word = e.epoch as *mut u32;
    if e.step == AG_ENGINE_ENTER {
        if tid == 0 {
            // One CTA per launch, one launch per fused launch: the same count as the fused
            // kernel's counter.
            let epoch = launch_epoch(e.launches as *mut u64, 1);
            core::ptr::write_volatile(word, epoch);
            raise_ready(p, epoch);
            let b =
                Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: Role::IntraComm as u32 };
            if !peers_ready(p, epoch, &b) {
                stop(b.diag);
            }
        }
        return;
    }
    // Written by this stream's enter step, an earlier launch.
    let epoch = core::ptr::read_volatile(word);
    let flags = if e.peer == p.local_rank { p.flags } else { pick(&p.peer_flags, e.peer) } as *mut u32;
    let mut c = e.first + tid;
    while c < e.end {
        signal(flags.add(p.data_flag(p.rank, c) as usize), epoch);
        c += block_dim_x();
    }
}

/// AllGather + GEMM's copy-engine steps: one CTA of any width (see [`engine_step`]).
///
/// # Safety
/// Launched only by its host op (host/ops/ag_gemm.rs), one CTA, with every address in `e` valid
/// for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_ag_gemm_engine(e: AgEngineParams) {
    engine_step(&e);
}

b_layout_entry_points! {
    AgGemmParams => ag_gemm;
    /// AllGather + GEMM with B `[K, N]` row-major.
    kn: mk_ag_gemm_kn;
    /// AllGather + GEMM with B `[N, K]` row-major.
    nk: mk_ag_gemm_nk
}
