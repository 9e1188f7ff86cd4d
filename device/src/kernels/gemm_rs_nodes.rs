//! GEMM + ReduceScatter / AllReduce over several nodes, in one launch (the protocol is on
//! [`GemmRsParams`]): compute CTAs run the one-node kernel's engine and epilogue with each block's
//! collector in the owner's place ([`super::gemm_rs`], `NODES = true`, walked by [`NodeTiles`]),
//! which leaves this rank's node partials of the blocks it collects in its staging, flagged; then
//! - inter-send CTAs (one thread each) push every group of finished node partials that another
//!   node needs as one FIFO WRITE (data, then the flag of the group's last half tile, epoch-valued);
//! - inter-reduce CTAs wait, half tile by half tile, for every node's partial of each block this
//!   rank finalises, add them in node order (fp32) and store the result into this rank's output,
//!   and for the all-reduce into every local rank's, flagging `done` there.
//!
//! Compute CTAs never wait for these roles (only the all-reduce's last waits for the other local
//! ranks' `done`), and every CTA of the grid is resident at once (the host checks it), so the
//! roles cannot starve each other.
use super::gemm_rs::{compute, enter, peer};
use crate::abi::*;
use crate::arch::*;
use crate::comm::signal::signal;
use crate::comm::{fifo_push, signal_remote};
use crate::gemm::epilogue::StoreC;
use crate::gemm::*;
use crate::sched::{div_nz, rem_nz, NodeTiles, OwnerTiles, Role, TileGrid};
use crate::sync::Bound;
use crate::tile::wgmma_acc_coord;

/// Threads of an inter-reduce CTA that sum: 2048 chunks of 16 bytes per half tile, 8 each.
const SUM_THREADS: u32 = 256;
/// Chunks of a half tile per summing thread.
const CHUNKS: usize = (HALF_TILE_BYTES / 16 / SUM_THREADS) as usize;
const _: () = assert!(CHUNKS == 8, "the summing code is unrolled for 8 chunks per thread");

fn bound(p: &GemmRsParams, role: Role) -> Bound<'_> {
    Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: role as u32 }
}

/// Inter-send CTA `idx` of `ctas` (its thread 0): CTA 0 first tells this rank's pairs on the
/// other nodes (the ranks that send to it) that it entered the launch; then group after group of
/// the blocks whose node partials leave this node (walk order, groups striped over the CTAs),
/// it waits until this rank's helpers flagged every half tile of the group and pushes one WRITE
/// of the group to each destination, from its node-partial slots to the same offsets there.
/// The destination entered this launch: the helpers waited for that before writing the slots.
///
/// # Safety
/// Launched as the several-node kernel is, with `p` valid; `epoch` is this launch's.
#[inline(always)]
unsafe fn inter_send(p: &GemmRsParams, epoch: u32, idx: u32, ctas: u32) {
    let b = bound(p, Role::InterSend);
    let (map, all_reduce) = (p.node_map(), p.is_all_reduce());
    let node = map.node();
    let flag_off = |index: u32| p.flags_heap_off + 4 * index as u64;
    if idx == 0 {
        for m in 0..map.nodes {
            if m != node
                && signal_remote(&p.fifo, map.pair(m), flag_off(GemmRsParams::ready_flag(p.rank)), epoch, &b).is_err()
            {
                return;
            }
        }
    }
    let flags = p.flags as *const u32;
    let groups = p.groups();
    let mut k = idx;
    while k < map.sent_blocks(all_reduce) * groups {
        let qi = map.collected_node(div_nz(k, groups));
        let (first, end) = p.group_items(rem_nz(k, groups));
        for item in first..end {
            if b.flag(flags.add(p.node_flag(qi, node, item) as usize), epoch, item).is_err() {
                return;
            }
        }
        let at = FifoCmd::loc(BUF_HEAP, p.staging_heap_off + p.node_offset(qi, node, first));
        for j in 0..map.dests(qi, all_reduce) {
            let d = map.dest(qi, j, all_reduce);
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_WRITE, 1, d, 0),
                src: at,
                dst: at,
                bytes: (end - first) as u64 * HALF_TILE_BYTES as u64,
                flag: FifoCmd::loc(BUF_HEAP, flag_off(p.node_flag(qi, node, end - 1))),
                flag_value: epoch as u64,
                ..Default::default()
            };
            if fifo_push(&p.fifo, cmd, b.timeout_ns, b.diag, b.site(d, WAIT_FLAG)).is_err() {
                return;
            }
        }
        k += ctas;
    }
}

/// Where block `q` starts in local rank `d`'s output: the peer table holds where this rank's
/// own block starts there (all-reduce outputs are `[M, N]`, blocks `rows` apart).
///
/// # Safety
/// `p.peers` is a live [`PeerTable`]; `d < MAX_LOCAL_RANKS`.
#[inline(always)]
unsafe fn block_out(p: &GemmRsParams, d: u32, q: u32) -> u64 {
    let table = &*(p.peers as *const PeerTable);
    let block = p.rows as u64 * p.gemm.n as u64 * if p.gemm.out_f32 != 0 { 4 } else { 2 };
    peer(&table.out, d).wrapping_add((q as u64).wrapping_sub(p.rank as u64).wrapping_mul(block))
}

/// Thread `t` (< [`SUM_THREADS`]) of an inter-reduce CTA: its chunks `t + SUM_THREADS x c`
/// (`c` < [`CHUNKS`], values `8c ..` of the result) of half tile `item` of my `qi`-th collected
/// block, every node's partial added in node order (fp32, starting from node 0's value). Chunk
/// `e` is thread `e % 128`'s 16 bytes `e / 128` of the consumers' staging layout: its
/// accumulators `8 (e / 128) ..` (see `gemm_rs`). Unrolled: the 64 sums stay in registers.
///
/// # Safety
/// Every node's partial of the half tile is in (thread 0 saw the flags, then a block barrier).
#[inline(always)]
unsafe fn sum_nodes(p: &GemmRsParams, qi: u32, item: u32, t: u32) -> [f32; 8 * CHUNKS] {
    let mut sum = [0f32; 8 * CHUNKS];
    let chunk = |m: u32, c: usize| {
        let src = (p.staging + p.node_offset(qi, m, item)) as *const [u32; 4];
        ld_global_v4_u32(src.add(t as usize + SUM_THREADS as usize * c))
    };
    macro_rules! first {
        ($c:expr) => {{
            let w = chunk(0, $c);
            for i in 0..4 {
                (sum[8 * $c + 2 * i], sum[8 * $c + 2 * i + 1]) = unpack_bf16x2(w[i]);
            }
        }};
    }
    unroll8!(first);
    for m in 1..p.nodes {
        macro_rules! add {
            ($c:expr) => {{
                let w = chunk(m, $c);
                for i in 0..4 {
                    let (lo, hi) = unpack_bf16x2(w[i]);
                    sum[8 * $c + 2 * i] += lo;
                    sum[8 * $c + 2 * i + 1] += hi;
                }
            }};
        }
        unroll8!(add);
    }
    sum
}

/// Store thread `t`'s summed chunks (see [`sum_nodes`]) of half tile `half` of tile (`tm`,
/// `tn`) into the block `[rows, N]` at `out`, clipped to it.
///
/// # Safety
/// `out` holds the block in the output's type.
#[inline(always)]
unsafe fn store_chunks(p: &GemmRsParams, out: u64, sum: &[f32; 8 * CHUNKS], (tm, tn, half): (u32, u32, u32), t: u32) {
    let c = StoreC { c_map: 0, c: out, m: p.rows, n: p.gemm.n, out_f32: p.gemm.out_f32 != 0 };
    let (r0, c0) = (tm * TILE_M + half * 64, tn * TILE_N);
    macro_rules! put {
        ($k:expr) => {{
            let e = t + SUM_THREADS * $k;
            let (tt, j) = (e % 128, e / 128);
            // Accumulators 8j..8j+8: column pairs at (r, c) and (r + 8, c), then 8 columns on.
            let (r, col) = wgmma_acc_coord(tt, 8 * j);
            let (_, col8) = wgmma_acc_coord(tt, 8 * j + 4);
            let s = &sum[8 * $k..8 * $k + 8];
            c.put_pair(r0 + r, c0 + col, s[0], s[1]);
            c.put_pair(r0 + r + 8, c0 + col, s[2], s[3]);
            c.put_pair(r0 + r, c0 + col8, s[4], s[5]);
            c.put_pair(r0 + r + 8, c0 + col8, s[6], s[7]);
        }};
    }
    unroll8!(put);
}

/// Inter-reduce CTA `idx` of `ctas` (all its threads; `epoch` valid on thread 0): half tiles of
/// the blocks this rank finalises (walk order, striped over the CTAs). For each, thread 0 waits
/// for every node's flag; the summing threads add the node partials and store the result into
/// this rank's output, and for the all-reduce into every local rank's (which entered the launch
/// first), then flag `done` there once every thread's stores are out.
///
/// # Safety
/// Launched as the several-node kernel is, with `p` valid.
#[inline(always)]
unsafe fn inter_reduce(p: &GemmRsParams, epoch: u32, idx: u32, ctas: u32) {
    let tid = thread_idx_x();
    let b = bound(p, Role::InterReduce);
    let (map, all_reduce) = (p.node_map(), p.is_all_reduce());
    let flags = p.flags as *const u32;
    let table = &*(p.peers as *const PeerTable);
    let tiles = OwnerTiles::new(p.rows, p.gemm.n, (TILE_M, TILE_N), p.gemm.group_m, p.world, p.rank, 0);
    let grid = TileGrid { m_tiles: tiles.m_tiles, n_tiles: tiles.n_tiles, group_m: tiles.group_m };
    if tid == 0 && all_reduce {
        for lr in 0..p.local_world {
            let rank = p.rank - p.local_rank + lr;
            if lr != p.local_rank {
                let _ = b.flag(flags.add(GemmRsParams::ready_flag(rank) as usize), epoch, rank);
            }
        }
    }
    let items = p.items();
    let finals = map.finals(all_reduce);
    let mut k = idx;
    while k < finals * items {
        let qi = map.finalised_node(div_nz(k, items));
        let item = rem_nz(k, items);
        let (tm, tn) = grid.coords(item / 2);
        let half = item % 2;
        // A failed wait already reported (the launch fails); going on keeps every thread moving.
        if tid == 0 {
            for m in 0..map.nodes {
                let _ = b.flag(flags.add(p.node_flag(qi, m, p.arrival_item(m, item)) as usize), epoch, item);
            }
        }
        sync_threads();
        let q = map.pair(qi);
        if tid < SUM_THREADS {
            let sum = sum_nodes(p, qi, item, tid);
            if all_reduce {
                for d in 0..p.local_world {
                    store_chunks(p, block_out(p, d, q), &sum, (tm, tn, half), tid);
                }
            } else {
                store_chunks(p, peer(&table.out, p.local_rank), &sum, (tm, tn, half), tid);
            }
        }
        if all_reduce {
            // Every thread's stores, then one release for all of them.
            fence_acq_rel_sys();
            sync_threads();
            if tid == 0 {
                let slot = tm * tiles.n_tiles + tn;
                for lr in 0..p.local_world {
                    if lr != p.local_rank {
                        signal((peer(&table.flags, lr) as *mut u32).add(p.done_flag(q, slot, half) as usize), epoch);
                    }
                }
            }
        }
        k += ctas;
    }
}

/// The several-node kernel: every CTA takes its role from its index.
///
/// # Safety
/// Launched with `THREADS` threads and `SMEM_BYTES` of dynamic shared memory per CTA, every CTA
/// of the grid resident at once, `p` as the host plans it (`ops::gemm_rs`).
#[inline(always)]
unsafe fn gemm_rs_nodes<const TRANS_B: u32>(p: &GemmRsParams) {
    let tid = thread_idx_x();
    // Only thread 0 of a communication CTA waits on or raises flags, so only it needs the epoch.
    let epoch = if tid == 0 { enter(p) } else { 0 };
    let roles = p.gemm.roles;
    match roles.role_of(block_idx_x()) {
        Some((Role::Compute, _)) => {
            let g = &p.gemm;
            let walk = NodeTiles::new(p.rows, g.n, (TILE_M, TILE_N), g.group_m, p.world, p.rank, p.local_world, p.lead)
                .rotated(roles.compute);
            compute::<TRANS_B, true, false, _>(p, walk.blocks, &walk);
        }
        Some((Role::InterSend, idx)) if tid == 0 => inter_send(p, epoch, idx, roles.inter_send),
        Some((Role::InterReduce, idx)) => inter_reduce(p, epoch, idx, roles.inter_reduce),
        _ => {}
    }
}

b_layout_entry_points! {
    GemmRsParams => gemm_rs_nodes;
    /// GEMM + ReduceScatter / AllReduce with B `[K/W, N]` row-major, several nodes.
    kn: mk_gemm_rs_nodes_kn;
    /// GEMM + ReduceScatter / AllReduce with B `[N, K/W]` row-major, several nodes.
    nk: mk_gemm_rs_nodes_nk
}
