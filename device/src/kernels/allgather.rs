//! A GPU-driven all-gather: the first user of the communication runtime.
//!
//! Roles (from `p.roles`): intra-comm CTAs copy this rank's shard into every local rank's output
//! over NVLink (`p.copy_mode`: 16-byte vector stores from every thread, or TMA bulk copies
//! through shared memory issued by one thread), then raise that peer's flag for this
//! rank; one inter-send CTA pushes WRITE commands (data, then flag on the last chunk) into the FIFO
//! for every rank on another node, which the CPU proxy carries out. Finally one thread waits,
//! bounded, until every other rank's flag reached this launch's epoch.
//!
//! Nothing is reset between launches: flags carry epochs, and the per-peer completion counters
//! only grow (all intra CTAs of launch `e` bring a counter to `e * intra_ctas`), so the last CTA to
//! finish a peer's copy knows it is last without a reset.
use crate::abi::*;
use crate::arch::*;
use crate::comm::fifo_push;
use crate::kernels_info::allgather::{BULK_AHEAD, BULK_BAR_OFF, BULK_CHUNK, BULK_STAGES, THREADS};
use crate::sched::Role;
use crate::sync::{wait_flag_sys_u32, wait_mbarrier, WaitSite};

const VEC: u64 = 16;
const PIECE_ALIGN: u64 = 64 << 10;

/// One thread moves bytes `start..end` (a multiple of 16; both buffers 16-byte aligned) from
/// `src` to `dst` with TMA bulk copies through a ring of `BULK_STAGES` shared-memory stages:
/// loads run `BULK_AHEAD` chunks in front of the stores, so up to `BULK_STAGES - BULK_AHEAD`
/// stores read shared memory at once, and a stage is reloaded only once the store that read it
/// is done reading. `used` counts chunks ever loaded through the ring, which gives each stage's
/// mbarrier phase across calls. Returns false on a timeout (already reported).
#[inline(always)]
unsafe fn bulk_copy(p: &AllGatherParams, src: u64, dst: u64, start: u64, end: u64, used: &mut u32) -> bool {
    const STORES: u32 = BULK_STAGES - BULK_AHEAD;
    let data = dyn_smem_base();
    let bars = data + BULK_BAR_OFF;
    let count = (end - start).div_ceil(BULK_CHUNK as u64) as u32;
    let off = |i: u32| start + i as u64 * BULK_CHUNK as u64;
    let len = |i: u32| (end - off(i)).min(BULK_CHUNK as u64) as u32;
    let stage = |i: u32| (*used + i) % BULK_STAGES;
    let load = |i: u32| {
        let s = stage(i);
        mbarrier_arrive_expect_tx(bars + 8 * s, len(i));
        bulk_load(data + s * BULK_CHUNK, src + off(i), len(i), bars + 8 * s);
    };
    for i in 0..count.min(BULK_AHEAD) {
        load(i);
    }
    let site = WaitSite { rank: p.rank, role: Role::IntraComm as u32, tile: block_idx_x(), what: WAIT_MBAR_FULL };
    let mut ok = true;
    for i in 0..count {
        let s = stage(i);
        let parity = ((*used + i) / BULK_STAGES) & 1;
        if wait_mbarrier(bars + 8 * s, parity, p.timeout_ns, p.diag as *mut WaitDiag, site).is_err() {
            ok = false;
            break;
        }
        bulk_store(dst + off(i), data + s * BULK_CHUNK, len(i));
        bulk_commit_group();
        if i + BULK_AHEAD < count {
            // The stage of chunk i + AHEAD was read by store i + AHEAD - STAGES; the STORES newer
            // ones may still be reading.
            bulk_wait_group_read::<STORES>();
            load(i + BULK_AHEAD);
        }
    }
    bulk_wait_group::<0>();
    fence_proxy_async_global();
    *used += count;
    ok
}

#[inline(always)]
unsafe fn copy_range(src: *const u8, dst: *mut u8, start: u64, end: u64) {
    // 16-byte vectors for the aligned bulk, bytes for the tail (shards need not be multiples).
    // A destination that is not 16-byte aligned (odd shard sizes) is copied bytewise.
    let t = thread_idx_x() as u64;
    let vec_ok = (src as u64 | dst as u64) % VEC == 0;
    let aligned_end = if vec_ok { start + ((end - start) / VEC) * VEC } else { start };
    // Eight 16-byte loads in flight per thread before their stores: one at a time leaves an SM
    // latency-bound at ~10 GB/s (measured), far below NVLink.
    const UNROLL: u64 = 8;
    const STEP: u64 = THREADS as u64 * VEC;
    let mut base = start;
    while base + UNROLL * STEP <= aligned_end {
        let mut v = [[0u32; 4]; UNROLL as usize];
        for (k, x) in v.iter_mut().enumerate() {
            *x = ld_global_nc_v4_u32(src.add((base + k as u64 * STEP + t * VEC) as usize) as *const [u32; 4]);
        }
        for (k, x) in v.iter().enumerate() {
            st_global_v4_u32(dst.add((base + k as u64 * STEP + t * VEC) as usize) as *mut [u32; 4], *x);
        }
        base += UNROLL * STEP;
    }
    let mut i = base + t * VEC;
    while i < aligned_end {
        let v = ld_global_nc_v4_u32(src.add(i as usize) as *const [u32; 4]);
        st_global_v4_u32(dst.add(i as usize) as *mut [u32; 4], v);
        i += STEP;
    }
    let mut j = aligned_end + t;
    while j < end {
        *dst.add(j as usize) = *src.add(j as usize);
        j += THREADS as u64;
    }
}

#[inline(always)]
unsafe fn intra(p: &AllGatherParams, idx: u32) {
    let ctas = p.roles.intra_comm;
    let bulk = p.copy_mode == COPY_BULK;
    if bulk && thread_idx_x() == 0 {
        for s in 0..BULK_STAGES {
            mbarrier_init(dyn_smem_base() + BULK_BAR_OFF + 8 * s, 1);
        }
        fence_mbarrier_init();
    }
    let mut used = 0u32;
    // Set by thread 0 when a bulk wait timed out (already reported): it skips further copies and
    // raises no flag, but keeps meeting the block barriers.
    let mut failed = false;
    // Each local peer's shard is split into `ctas` contiguous pieces: 64 KiB multiples when the
    // shard is large enough, else 16-byte multiples.
    let align = if p.shard_bytes >= ctas as u64 * PIECE_ALIGN { PIECE_ALIGN } else { VEC };
    let piece = p.shard_bytes.div_ceil(ctas as u64).div_ceil(align) * align;
    let start = (idx as u64 * piece).min(p.shard_bytes);
    let end = (start + piece).min(p.shard_bytes);
    let src = p.input as *const u8;
    let dst_off = p.rank as u64 * p.shard_bytes;
    for lp in 0..p.local_world {
        // Start with a different peer in each CTA to spread NVLink traffic.
        let peer = (lp + p.local_rank + idx) % p.local_world;
        if p.in_place != 0 && peer == p.local_rank {
            continue; // the shard already sits in this rank's output
        }
        let dst = (p.peer_output[peer as usize] as *mut u8).add(dst_off as usize);
        if bulk && (src as u64 | dst as u64) % VEC == 0 {
            // Thread 0 moves the 16-byte multiple; every thread helps with the ragged tail.
            let bulk_end = start + (end - start) / VEC * VEC;
            if thread_idx_x() == 0 && !failed {
                failed = !bulk_copy(p, src as u64, dst as u64, start, bulk_end, &mut used);
            }
            copy_range(src, dst, bulk_end, end);
        } else {
            copy_range(src, dst, start, end);
        }
        sync_threads();
        if thread_idx_x() == 0 && !failed {
            fence_acq_rel_sys();
            let counter = (p.counters as *mut u32).add(peer as usize);
            let before = atom_add_acq_rel_sys_u32(counter, 1);
            if before + 1 == p.epoch.wrapping_mul(ctas) {
                fence_acq_rel_sys();
                st_release_sys_u32((p.peer_flags[peer as usize] as *mut u32).add(p.rank as usize), p.epoch);
            }
        }
    }
}

#[inline(always)]
unsafe fn inter_send(p: &AllGatherParams) {
    if thread_idx_x() != 0 {
        return;
    }
    let my_node_first = p.rank - p.local_rank;
    let diag = p.diag as *mut WaitDiag;
    let chunk = if p.chunk_bytes == 0 { p.shard_bytes } else { p.chunk_bytes };
    for q in 0..p.world {
        if q >= my_node_first && q < my_node_first + p.local_world {
            continue; // same node: NVLink path
        }
        let mut off = 0;
        while off < p.shard_bytes {
            let bytes = chunk.min(p.shard_bytes - off);
            let last = off + bytes == p.shard_bytes;
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_WRITE, last as u64, q, 0),
                src: FifoCmd::loc(BUF_INPUT, off),
                dst: FifoCmd::loc(BUF_OUTPUT, p.rank as u64 * p.shard_bytes + off),
                bytes,
                flag: if last { FifoCmd::loc(BUF_FLAGS, 4 * p.rank as u64) } else { 0 },
                flag_value: if last { p.epoch as u64 } else { 0 },
                pushed_ns: 0,
                _reserved: 0,
            };
            let site = WaitSite { rank: p.rank, role: Role::InterSend as u32, tile: q, what: WAIT_FLAG };
            if fifo_push(&p.fifo, cmd, p.timeout_ns, diag, site).is_err() {
                return;
            }
            off += bytes;
        }
    }
}

#[inline(always)]
unsafe fn wait_all(p: &AllGatherParams) {
    let diag = p.diag as *mut WaitDiag;
    for s in 0..p.world {
        if s == p.rank {
            continue;
        }
        let site = WaitSite { rank: p.rank, role: Role::IntraComm as u32, tile: s, what: WAIT_FLAG };
        if wait_flag_sys_u32((p.flags as *const u32).add(s as usize), p.epoch, p.timeout_ns, diag, site).is_err() {
            return;
        }
    }
}

/// The all-gather kernel: `p.roles.intra_comm` + `p.roles.inter_send` CTAs of 512 threads.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_allgather(p: AllGatherParams) {
    match p.roles.role_of(block_idx_x()) {
        Some((Role::IntraComm, idx)) => {
            intra(&p, idx);
            // The first intra CTA also waits for everyone (the kernel ends when all data is in).
            if idx == 0 && thread_idx_x() == 0 {
                wait_all(&p);
            }
        }
        Some((Role::InterSend, _)) => inter_send(&p),
        _ => {}
    }
}
