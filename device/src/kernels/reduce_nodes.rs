//! The unfused reference of GEMM + ReduceScatter / AllReduce over several nodes (see
//! [`ReduceNodesParams`]): after each rank's plain GEMM wrote its bf16 partial, one launch
//! 1. sums, for every block this rank collects, its node's partials (its own first, then local
//!    rank order, fp32; read over NVLink) into a bf16 node partial, row-major;
//! 2. once every CTA is done with that (last arriver), sends each node partial another node needs
//!    with one FIFO WRITE (to the same heap offset there; data, then the flag) and flags its own;
//! 3. waits for every node's partial of each block it finalises, adds them in node order (fp32)
//!    and stores the result, for the all-reduce into every local rank's output too, then (last
//!    arriver) flags `done` there and waits for the other local ranks' blocks.
//!
//! The fused kernel (`gemm_rs_nodes`) makes the same sums in the same order, so the bits agree.
use crate::abi::*;
use crate::arch::*;
use crate::comm::signal::{last_arriver, launch_epoch, signal};
use crate::comm::{fifo_push, signal_remote};
use crate::sched::{div_nz, rem_nz, Role};
use crate::sync::Bound;

/// 8 bf16 at `p` as f32.
///
/// # Safety
/// `p` is 16 valid, 16-byte aligned bytes of global memory.
#[inline(always)]
unsafe fn load8(p: *const u16) -> [f32; 8] {
    let w = ld_global_v4_u32(p as *const [u32; 4]);
    let mut v = [0f32; 8];
    for i in 0..4 {
        (v[2 * i], v[2 * i + 1]) = unpack_bf16x2(w[i]);
    }
    v
}

/// `v += 8 bf16 at p`.
///
/// # Safety
/// As [`load8`].
#[inline(always)]
unsafe fn add8(v: &mut [f32; 8], p: *const u16) {
    let x = load8(p);
    for i in 0..8 {
        v[i] += x[i];
    }
}

/// Store 8 values at element `off` of `out` (f32 or bf16).
///
/// # Safety
/// `out` holds element `off + 7` of its type; `off` is a multiple of 8.
#[inline(always)]
unsafe fn store8(out: u64, off: usize, v: &[f32; 8], f32_out: bool) {
    if f32_out {
        let o = (out as *mut f32).add(off) as *mut [u32; 4];
        st_global_v4_u32(o, [v[0].to_bits(), v[1].to_bits(), v[2].to_bits(), v[3].to_bits()]);
        st_global_v4_u32(o.add(1), [v[4].to_bits(), v[5].to_bits(), v[6].to_bits(), v[7].to_bits()]);
    } else {
        let w = [pack_bf16x2(v[0], v[1]), pack_bf16x2(v[2], v[3]), pack_bf16x2(v[4], v[5]), pack_bf16x2(v[6], v[7])];
        st_global_v4_u32((out as *mut u16).add(off) as *mut [u32; 4], w);
    }
}

/// See the module docs.
///
/// # Safety
/// Every CTA of the grid resident at once (the phases wait for each other: the host launches one
/// per SM at most), `p` as the host plans it (`ops::gemm_rs`), after this call's GEMMs on every
/// rank's stream.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_reduce_nodes(p: ReduceNodesParams) {
    let tid = thread_idx_x();
    let ctas = grid_dim_x();
    let b = Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: p.rank, role: Role::InterReduce as u32 };
    let map = p.node_map();
    let (node, lr, nodes, lw) = (map.node(), map.local_rank(), p.nodes, p.local_world);
    let all_reduce = p.is_all_reduce();
    let flags = p.flags as *mut u32;
    let flag_off = |index: u32| p.flags_heap_off + 4 * index as u64;
    let mut epoch = 0;
    let mut ok = true;
    if tid == 0 {
        epoch = launch_epoch(p.launches as *mut u64, ctas);
        if block_idx_x() == 0 {
            // My partial is complete (my GEMM ran before on this stream) and I entered the
            // launch: tell this node's ranks, and the ranks of other nodes that send to me.
            for r in 0..lw {
                if r != lr {
                    signal(
                        (pick(&p.peer_flags, r) as *mut u32).add(ReduceNodesParams::ready_flag(p.rank) as usize),
                        epoch,
                    );
                }
            }
            for m in 0..nodes {
                if m != node {
                    ok &=
                        signal_remote(&p.fifo, map.pair(m), flag_off(ReduceNodesParams::ready_flag(p.rank)), epoch, &b)
                            .is_ok();
                }
            }
        }
        for r in 0..lw {
            let rank = p.rank - lr + r;
            if ok && r != lr {
                ok = b.flag(flags.add(ReduceNodesParams::ready_flag(rank) as usize), epoch, rank).is_ok();
            }
        }
    }
    sync_threads();

    // 1. Node partials of every block I collect (each `rows x n`, 8 columns per thread and step).
    let vecs = p.n / 8;
    let per_block = p.rows * vecs;
    let stride = ctas * block_dim_x();
    let mut i = block_idx_x() * block_dim_x() + tid;
    while i < nodes * per_block {
        let (qi, x) = (div_nz(i, per_block), rem_nz(i, per_block));
        let (r, v) = (div_nz(x, vecs), rem_nz(x, vecs));
        let row = map.pair(qi) * p.rows + r;
        let off = (row * p.n + 8 * v) as usize;
        let mut sum = load8((pick(&p.partials, lr) as *const u16).add(off));
        for s in 0..lw {
            if s != lr {
                add8(&mut sum, (pick(&p.partials, s) as *const u16).add(off));
            }
        }
        let dst = p.nodebuf + p.nodebuf_offset(qi, node);
        store8(dst, (r * p.n + 8 * v) as usize, &sum, false);
        i += stride;
    }
    sync_threads();
    if tid == 0 && last_arriver(p.counters as *mut u32, ctas, epoch) {
        // 2. Every CTA's node partials are written: send, and flag my own finals.
        for k in 0..map.sent_blocks(all_reduce) {
            let qi = map.collected_node(k);
            let at = FifoCmd::loc(BUF_HEAP, p.nodebuf_heap_off + p.nodebuf_offset(qi, node));
            for j in 0..map.dests(qi, all_reduce) {
                let d = map.dest(qi, j, all_reduce);
                // It entered this launch: done with the last one's buffer of this parity.
                ok = ok && b.flag(flags.add(ReduceNodesParams::ready_flag(d) as usize), epoch, d).is_ok();
                let cmd = FifoCmd {
                    header: FifoCmd::header_word(OP_WRITE, 1, d, 0),
                    src: at,
                    dst: at,
                    bytes: p.block_bytes(),
                    flag: FifoCmd::loc(BUF_HEAP, flag_off(p.node_flag(qi, node))),
                    flag_value: epoch as u64,
                    ..Default::default()
                };
                ok = ok && fifo_push(&p.fifo, cmd, b.timeout_ns, b.diag, b.site(d, WAIT_FLAG)).is_ok();
            }
        }
        let finals = map.finals(all_reduce);
        for k in nodes - finals..nodes {
            signal(flags.add(p.node_flag(map.collected_node(k), node) as usize), epoch);
        }
    }

    // 3. Every node's partial of each block I finalise, in node order.
    let finals = map.finals(all_reduce);
    if tid == 0 {
        for k in nodes - finals..nodes {
            for m in 0..nodes {
                let qi = map.collected_node(k);
                ok = ok && b.flag(flags.add(p.node_flag(qi, m) as usize), epoch, m).is_ok();
            }
        }
    }
    sync_threads();
    let mut i = block_idx_x() * block_dim_x() + tid;
    while i < finals * per_block {
        let (f, x) = (div_nz(i, per_block), rem_nz(i, per_block));
        let qi = map.collected_node(nodes - finals + f);
        let (r, v) = (div_nz(x, vecs), rem_nz(x, vecs));
        let at = (r * p.n + 8 * v) as usize;
        let part = |m: u32| (p.nodebuf + p.nodebuf_offset(qi, m)) as *const u16;
        let mut sum = load8(part(0).add(at));
        for m in 1..nodes {
            add8(&mut sum, part(m).add(at));
        }
        if all_reduce {
            let off = ((map.pair(qi) * p.rows + r) * p.n + 8 * v) as usize;
            for d in 0..lw {
                store8(pick(&p.out, d), off, &sum, p.out_f32 != 0);
            }
        } else {
            store8(pick(&p.out, lr), at, &sum, p.out_f32 != 0);
        }
        i += stride;
    }
    if !all_reduce {
        return;
    }
    // Every thread's stores, then the last CTA raises `done` on the other local ranks and waits
    // for theirs (the launch ends with the whole sum in my output).
    fence_acq_rel_sys();
    sync_threads();
    let counter = (p.counters as *mut u32).add(1);
    if tid == 0 && last_arriver(counter, ctas, epoch) {
        for r in 0..lw {
            if r != lr {
                signal((pick(&p.peer_flags, r) as *mut u32).add(p.done_flag(lr) as usize), epoch);
            }
        }
        for r in 0..lw {
            if ok && r != lr {
                ok = b.flag(flags.add(p.done_flag(r) as usize), epoch, p.rank - lr + r).is_ok();
            }
        }
    }
}
