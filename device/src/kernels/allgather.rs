//! A GPU-driven all-gather, built from the comm primitives.
//!
//! Roles (from `p.roles`): intra-comm CTAs copy this rank's shard into every local rank's output
//! over NVLink ([`copy_block`]: TMA bulk copies issued by one thread, or vector stores from every
//! thread), and the last CTA to finish a peer's copy raises that peer's flag for this rank
//! ([`last_arriver`], [`signal`]); one inter-send CTA pushes WRITE commands (data, then flag on the
//! last chunk) into the FIFO for every rank on another node, which the CPU proxy carries out.
//! Finally one thread waits, bounded, until every other rank's flag reached this launch's epoch.
//!
//! With [`COPY_PULL`] the intra-comm CTAs read instead: each pulls its piece of every local
//! rank's shard into this rank's own output (reads from every peer interleaved, [`copy_fan_in`]),
//! raises its own `data` flags and tells each source it is done reading (`taken`).
//!
//! Flags (u32 epochs, [`AllGatherParams::flags`]): `data[s]` = rank s's shard is here,
//! `ready[s]` = rank s entered this launch, `taken[s]` = rank s is done reading my shard (pull).
//! Nobody writes into a rank's output or reads its shard before that rank's `ready` of the same
//! launch: its previous launch and everything the caller did with the output before this launch
//! are finished. A rank's launch ends only once every shard is in and (pulling) every local peer
//! has taken its shard and, with several nodes, the proxy's WRITEs for other nodes have read it
//! (the inter-send thread's `fifo_quiet`), so inputs may change between back-to-back launches.
//!
//! With the copy engines ([`COPY_CE_ENTER`], [`COPY_CE_LEAVE`]) the kernel only synchronises: the
//! host enqueues this rank's copies into every local peer between an entering launch (`ready`
//! raised, every local peer's awaited) and a leaving one (`data[rank]` raised on every local peer,
//! every shard awaited); the inter-send CTA, with several nodes, runs in the entering launch.
//!
//! Nothing is reset between launches: the epoch comes from a launch counter on the device
//! ([`launch_epoch`]), flags carry epochs, and the per-peer completion counters only grow.
use crate::abi::*;
use crate::arch::*;
use crate::comm::nvlink::{copy_block, copy_fan, copy_fan_in, BulkRing};
use crate::comm::signal::{last_arriver, launch_epoch, signal};
use crate::comm::{fifo_push, fifo_quiet, next_peer, signal_remote};
use crate::sched::Role;
use crate::sync::{stop, Bound};

const VEC: u64 = 16;
const PIECE_ALIGN: u64 = 64 << 10;

/// CTA `idx` of `ctas`'s piece of a shard: 64 KiB multiples when the shard is large enough,
/// else 16-byte multiples (the last piece takes the rest).
#[inline(always)]
fn piece(p: &AllGatherParams, idx: u32, ctas: u32) -> (u64, u64) {
    let len = p.shard_bytes;
    let align = if len >= ctas as u64 * PIECE_ALIGN { PIECE_ALIGN } else { VEC };
    let piece = len.div_ceil(ctas as u64).div_ceil(align) * align;
    let start = (idx as u64 * piece).min(len);
    (start, (start + piece).min(len))
}

/// Thread 0: wait until every other local rank entered this launch (its shard is written and
/// its output may be written); then a block barrier. Returns, on every thread, whether thread 0
/// gave up (so that no thread writes into a rank that never became ready).
#[inline(always)]
unsafe fn wait_local_ready(p: &AllGatherParams, epoch: u32, b: &Bound, tid: u32) -> bool {
    let mut failed = false;
    if tid == 0 {
        for lr in local_peers(p) {
            if !wait_ready(p, lr, epoch, b) {
                failed = true;
                break;
            }
        }
    }
    sync_threads_or(failed)
}

/// The other local ranks, in order.
#[inline(always)]
fn local_peers(p: &AllGatherParams) -> impl Iterator<Item = u32> + '_ {
    (0..p.local_world).filter(move |&lr| lr != p.local_rank)
}

/// One thread: wait (bounded) until local rank `lr` raised its `ready` of this launch. Returns
/// false when the wait timed out (reported through `b`).
#[inline(always)]
unsafe fn wait_ready(p: &AllGatherParams, lr: u32, epoch: u32, b: &Bound) -> bool {
    let rank = p.rank - p.local_rank + lr;
    b.flag((p.flags as *const u32).add((p.world + rank) as usize), epoch, rank).is_ok()
}

/// Fan push: CTA `idx` of `ctas` loads its piece of this rank's shard once and stores
/// it to every local rank (this rank's own output first, unless the shard is in it), by TMA bulk
/// copies (`bulk`, [`COPY_FAN`]) or from every thread's registers ([`COPY_LSU`]); the last CTA
/// done with a place raises `data[rank]` there (`counters[place]`).
#[inline(always)]
unsafe fn push_fan(
    p: &AllGatherParams,
    (bulk, ring): (bool, Option<&mut BulkRing>),
    (idx, ctas): (u32, u32),
    epoch: u32,
    b: &Bound,
) {
    let tid = thread_idx_x();
    if wait_local_ready(p, epoch, b, tid) {
        return; // nobody copies into a peer before it is ready
    }
    let first = (p.in_place != 0) as u32;
    let place = |k: u32| next_peer(p.local_rank, p.local_world, first + k);
    let dst_off = p.rank as u64 * p.shard_bytes;
    let places = (p.local_world - first, |k| pick(&p.peer_output, place(k)) + dst_off);
    let failed = !copy_fan(p.input, places, piece(p, idx, ctas), bulk, ring, b, p.rank, (tid, block_dim_x()));
    for k in 0..places.0 {
        if tid == 0 && !failed && last_arriver((p.counters as *mut u32).add(place(k) as usize), ctas, epoch) {
            signal((pick(&p.peer_flags, place(k)) as *mut u32).add(p.rank as usize), epoch);
        }
    }
}

/// Pull: CTA `idx` of `ctas` reads its piece of every local rank's shard (this
/// rank's own too, unless in place) into this rank's output, from all of them at once (each CTA
/// starting at another source, spreading the reads over the links); the last CTA done with a
/// source raises this rank's `data[source]` (`counters[local_world + source]`) and the source's
/// `taken[rank]`.
#[inline(always)]
unsafe fn pull(p: &AllGatherParams, ring: Option<&mut BulkRing>, (idx, ctas): (u32, u32), epoch: u32, b: &Bound) {
    let tid = thread_idx_x();
    if wait_local_ready(p, epoch, b, tid) {
        return; // nobody reads a peer's shard before it is ready
    }
    let first = (p.in_place != 0) as u32;
    let n = p.local_world - first;
    if n == 0 {
        return; // one rank on the node, in place: nothing to move
    }
    let rank_of = |lr: u32| p.rank - p.local_rank + lr;
    let from = |lr: u32| if lr == p.local_rank { p.input } else { pick(&p.peer_input, lr) };
    // Source k, over every local rank but this one when in place.
    let source = |k: u32| next_peer(p.local_rank, p.local_world, first + crate::sched::rem_nz(k + idx, n));
    let pair = |k: u32| {
        let lr = source(k);
        (from(lr), p.output + rank_of(lr) as u64 * p.shard_bytes)
    };
    let failed = !copy_fan_in((n, pair), piece(p, idx, ctas), true, ring, b, p.rank, (tid, block_dim_x()));
    for k in 0..n {
        let lr = source(k);
        let counter = (p.counters as *mut u32).add((p.local_world + lr) as usize);
        if tid == 0 && !failed && lr != p.local_rank && last_arriver(counter, ctas, epoch) {
            signal((p.flags as *mut u32).add(rank_of(lr) as usize), epoch);
            signal((pick(&p.peer_flags, lr) as *mut u32).add((2 * p.world + p.rank) as usize), epoch);
        }
    }
}

#[inline(always)]
unsafe fn intra(p: &AllGatherParams, idx: u32, epoch: u32, b: &Bound) {
    let ctas = p.roles.intra_comm;
    // SAFETY: this CTA has the intra-comm role, so there is at least one.
    core::hint::assert_unchecked(ctas != 0);
    let (tid, nthreads) = (thread_idx_x(), block_dim_x());
    let bulk = p.copy_mode != COPY_LSU;
    let mut ring = if bulk && tid == 0 { Some(BulkRing::new(dyn_smem_base())) } else { None };
    match p.copy_mode {
        COPY_FAN | COPY_LSU => return push_fan(p, (bulk, ring.as_mut()), (idx, ctas), epoch, b),
        COPY_PULL => return pull(p, ring.as_mut(), (idx, ctas), epoch, b),
        _ => {} // COPY_BULK: one peer after another, below
    }
    let (start, end) = piece(p, idx, ctas);
    let dst_off = p.rank as u64 * p.shard_bytes;
    // Set by thread 0 when a wait timed out (already reported): it raises no further flags.
    let mut failed = false;
    for lp in 0..p.local_world {
        // Start with a different peer in each CTA to spread NVLink traffic.
        let peer = next_peer(p.local_rank, p.local_world, lp + idx);
        if p.in_place != 0 && peer == p.local_rank {
            continue; // the shard already sits in this rank's output
        }
        if peer != p.local_rank {
            if tid == 0 && !failed {
                failed = !wait_ready(p, peer, epoch, b);
            }
            // Nobody copies into the peer before it is ready; after a timeout nobody copies on.
            if sync_threads_or(failed) {
                return;
            }
        }
        let dst = pick(&p.peer_output, peer) + dst_off;
        failed |= !copy_block(p.input, dst, (start, end), true, ring.as_mut(), b, peer, (tid, nthreads));
        if tid == 0 && !failed && last_arriver((p.counters as *mut u32).add(peer as usize), ctas, epoch) {
            signal((pick(&p.peer_flags, peer) as *mut u32).add(p.rank as usize), epoch);
        }
    }
}

/// [`COPY_CE_ENTER`], thread 0: wait until every local peer entered this launch, after which
/// the host's copies queued behind this launch may write into their outputs. The copy engines
/// cannot see a flag, so a wait that gives up (reported through `b`) stops this GPU's context
/// instead: nothing then runs on its stream, and nothing is written into a rank that never
/// became ready.
#[inline(always)]
unsafe fn engine_enter(p: &AllGatherParams, epoch: u32, b: &Bound) {
    for lr in local_peers(p) {
        if !wait_ready(p, lr, epoch, b) {
            // With several nodes the inter-send CTA may be the one that gave up: its record
            // must be whole before the context stops.
            stop(b.diag);
        }
    }
}

/// [`COPY_CE_LEAVE`], thread 0: this launch starts after the host's copies into every local
/// peer completed (stream order), so raise `data[rank]` there; then wait for every shard.
#[inline(always)]
unsafe fn engine_leave(p: &AllGatherParams, epoch: u32, b: &Bound) {
    for lr in local_peers(p) {
        signal((pick(&p.peer_flags, lr) as *mut u32).add(p.rank as usize), epoch);
    }
    wait_all(p, epoch, b);
}

#[inline(always)]
unsafe fn inter_send(p: &AllGatherParams, epoch: u32, b: &Bound) {
    let my_node_first = p.rank - p.local_rank;
    let remote = |q: u32| q < my_node_first || q >= my_node_first + p.local_world;
    let chunk = if p.chunk_bytes == 0 { p.shard_bytes } else { p.chunk_bytes };
    let ready = p.flags_heap_off + 4 * (p.world + p.rank) as u64;
    for q in (0..p.world).filter(|&q| remote(q)) {
        if signal_remote(&p.fifo, q, ready, epoch, b).is_err() {
            return;
        }
    }
    let mut through = 0;
    for q in (0..p.world).filter(|&q| remote(q)) {
        if b.flag((p.flags as *const u32).add((p.world + q) as usize), epoch, q).is_err() {
            return;
        }
        let mut off = 0;
        while off < p.shard_bytes {
            let bytes = chunk.min(p.shard_bytes - off);
            let last = off + bytes == p.shard_bytes;
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_WRITE, last as u64, q, 0),
                src: FifoCmd::loc(BUF_HEAP, p.input_heap_off + off),
                dst: FifoCmd::loc(BUF_HEAP, p.output_heap_off + p.rank as u64 * p.shard_bytes + off),
                bytes,
                flag: if last { FifoCmd::loc(BUF_HEAP, p.flags_heap_off + 4 * p.rank as u64) } else { 0 },
                flag_value: if last { epoch as u64 } else { 0 },
                pushed_ns: 0,
                _reserved: 0,
            };
            match fifo_push(&p.fifo, cmd, b.timeout_ns, b.diag, b.site(q, WAIT_FLAG)) {
                Ok(ticket) => through = ticket + 1,
                Err(()) => return,
            }
            off += bytes;
        }
    }
    // The caller may change our shard once this launch ends: the WRITEs must have read it.
    let _ = fifo_quiet(&p.fifo, through, b, p.rank);
}

#[inline(always)]
unsafe fn wait_all(p: &AllGatherParams, epoch: u32, b: &Bound) {
    for s in 0..p.world {
        if s != p.rank && b.flag((p.flags as *const u32).add(s as usize), epoch, s).is_err() {
            return;
        }
    }
    if p.copy_mode == COPY_PULL {
        // The caller may change our shard once this launch ends: every local peer must be done
        // reading it.
        for lr in local_peers(p) {
            let s = p.rank - p.local_rank + lr;
            if b.flag((p.flags as *const u32).add((2 * p.world + s) as usize), epoch, s).is_err() {
                return;
            }
        }
    }
}

/// The all-gather kernel: `p.roles.intra_comm` + `p.roles.inter_send` CTAs of 512 threads.
///
/// # Safety
/// Launched only by its host op (host/ops/), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_allgather(p: AllGatherParams) {
    let tid = thread_idx_x();
    // Only thread 0 of each CTA signals, pushes or waits, so only it needs the epoch.
    let epoch = if tid == 0 { launch_epoch(p.launches as *mut u64, p.roles.total()) } else { 0 };
    let bound = |role: Role| Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: p.rank, role: role as u32 };
    match p.roles.role_of(block_idx_x()) {
        Some((Role::IntraComm, _)) if p.copy_mode == COPY_CE_LEAVE => {
            if tid == 0 {
                engine_leave(&p, epoch, &bound(Role::IntraComm));
            }
        }
        Some((Role::IntraComm, idx)) => {
            let b = bound(Role::IntraComm);
            if idx == 0 && tid == 0 {
                // Tell this node's ranks that we entered the launch.
                for lr in local_peers(&p) {
                    signal((pick(&p.peer_flags, lr) as *mut u32).add((p.world + p.rank) as usize), epoch);
                }
            }
            if p.copy_mode == COPY_CE_ENTER {
                if idx == 0 && tid == 0 {
                    engine_enter(&p, epoch, &b);
                }
                return;
            }
            intra(&p, idx, epoch, &b);
            // The first intra CTA also waits for everyone (the kernel ends when all data is in).
            if idx == 0 && tid == 0 {
                wait_all(&p, epoch, &b);
            }
        }
        Some((Role::InterSend, _)) if tid == 0 => inter_send(&p, epoch, &bound(Role::InterSend)),
        _ => {}
    }
}
