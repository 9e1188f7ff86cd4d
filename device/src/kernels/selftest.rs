//! Small kernels that check each device-std building block on real hardware (run by
//! `tests/gpu_selftest.rs` and `mkernel info`).
use crate::abi::*;
use crate::arch::*;
use crate::kernels_info::gemm::{b_stage_bytes, kn_boxes, stage_tx_bytes};
use crate::sync::{wait_flag_sys_u32, wait_mbarrier, WaitSite};
use crate::tile::*;

/// `y[i] = a * x[i] + y[i]`, grid-stride.
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_axpy(p: AxpyParams) {
    let x = p.x as *const f32;
    let y = p.y as *mut f32;
    let stride = (block_dim_x() * grid_dim_x()) as u64;
    let mut i = (block_idx_x() * block_dim_x() + thread_idx_x()) as u64;
    while i < p.n {
        *y.add(i as usize) = p.a * *x.add(i as usize) + *y.add(i as usize);
        i += stride;
    }
}

/// Trap at once (tests a device fault's error path: the host must get an error, not a panic or
/// a hang). The parameter is unused.
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_trap(_p: AxpyParams) {
    trap();
}

/// One CTA of 128 threads: TMA-load a box into (swizzled) shared memory, dump the raw shared
/// bytes, and TMA-store the box back out through another tensor map.
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_tma_roundtrip(p: TmaRoundTripParams) {
    let smem = dyn_smem_base();
    let bar = smem + p.box_bytes; // box_bytes is a multiple of 1024
    let t = thread_idx_x();
    if t == 0 {
        prefetch_tensormap(p.src_map);
        mbarrier_init(bar, 1);
        fence_mbarrier_init();
    }
    sync_threads();
    if t == 0 {
        mbarrier_arrive_expect_tx(bar, p.box_bytes);
        tma_load_2d(smem, p.src_map, bar, p.c0, p.c1);
    }
    let site = WaitSite { rank: 0, role: 0, tile: 0, what: WAIT_MBAR_FULL };
    if wait_mbarrier(bar, 0, 1_000_000_000, &Diag::default(), site).is_err() {
        trap();
    }
    let raw = p.raw_out as *mut u32;
    let mut w = t;
    while w < p.box_bytes / 4 {
        *raw.add(w as usize) = ld_shared_u32(smem + 4 * w);
        w += block_dim_x();
    }
    sync_threads();
    if t == 0 && p.store != 0 {
        tma_store_2d(p.dst_map, smem, p.c0, p.c1);
        bulk_commit_group();
        bulk_wait_group::<0>();
    }
}

macro_rules! wgmma_tile_body {
    ($p:ident, $mma:ident, $n:literal) => {{
        let smem = dyn_smem_base();
        let a_s = smem;
        let b_s = smem + 64 * SW128_ROW_BYTES;
        // B [K, N] comes in whole 64-column boxes (224 columns take four): the GEMM's stage
        // layout, whose bytes `kernels_info::gemm` counts.
        let kn = $p.b_layout != B_NK;
        let bar = b_s + b_stage_bytes($n);
        let t = thread_idx_x();
        if t == 0 {
            mbarrier_init(bar, 1);
            fence_mbarrier_init();
        }
        sync_threads();
        if t == 0 {
            mbarrier_arrive_expect_tx(bar, stage_tx_bytes(64, $n, kn));
            tma_load_2d(a_s, $p.a_map, bar, 0, 0);
            if !kn {
                tma_load_2d(b_s, $p.b_map, bar, 0, 0);
            } else {
                let mut j = 0;
                while j < kn_boxes($n) {
                    tma_load_2d(b_s + j * 64 * SW128_ROW_BYTES, $p.b_map, bar, (64 * j) as i32, 0);
                    j += 1;
                }
            }
        }
        let site = WaitSite { rank: 0, role: 0, tile: 0, what: WAIT_MBAR_FULL };
        if wait_mbarrier(bar, 0, 1_000_000_000, &Diag::default(), site).is_err() {
            trap();
        }
        let mut d = [0f32; $n / 2];
        wgmma::fence();
        let mut ks = 0;
        while ks < 4 {
            let da = SmemDesc::k_major(a_s).advance(ks * K16_STEP_K_MAJOR).0;
            if $p.b_layout == B_NK {
                let db = SmemDesc::k_major(b_s).advance(ks * K16_STEP_K_MAJOR).0;
                wgmma::$mma::<0>(&mut d, da, db, ks);
            } else {
                let db = SmemDesc::mn_major(b_s, 64 * SW128_ROW_BYTES).advance(ks * K16_STEP_MN_MAJOR).0;
                wgmma::$mma::<1>(&mut d, da, db, ks);
            }
            ks += 1;
        }
        wgmma::commit_group();
        wgmma::wait_group::<0>();
        let out = $p.out as *mut f32;
        let mut i = 0;
        while i < $n / 2 {
            let (r, c) = wgmma_acc_coord(t, i as u32);
            *out.add((r * $n + c) as usize) = d[i];
            i += 1;
        }
    }};
}

/// One warpgroup: `out[64, n] = A[64, 64] @ B[64, n]` through TMA (128-byte swizzle) and four
/// m64nNk16 wgmmas, B K-major or N-major as the GEMM engine lays it out.
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_wgmma_tile(p: WgmmaTileParams) {
    match p.n {
        64 => wgmma_tile_body!(p, mma_m64n64k16_bf16, 64),
        128 => wgmma_tile_body!(p, mma_m64n128k16_bf16, 128),
        192 => wgmma_tile_body!(p, mma_m64n192k16_bf16, 192),
        224 => wgmma_tile_body!(p, mma_m64n224k16_bf16, 224),
        _ => wgmma_tile_body!(p, mma_m64n256k16_bf16, 256),
    }
}

/// GPU <-> host ping-pong over host-mapped memory. Round `i` (epoch `base_epoch + i + 1`): the GPU
/// writes `words` payload words, release-stores `flags[0] = epoch`; the host checks them, writes
/// its reply at `data[words]` and release-stores `flags[1] = epoch`; the GPU acquire-waits on
/// `flags[1]` (bounded) and saves the reply to `out[i]`.
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_flag_handshake(p: HandshakeParams) {
    if thread_idx_x() != 0 || block_idx_x() != 0 {
        return;
    }
    let data = p.host_data as *mut u32;
    let flags = p.host_flags as *mut u32;
    let out = p.out as *mut u32;
    let diag = &p.diag;
    for i in 0..p.iters {
        let epoch = p.base_epoch.wrapping_add(i + 1);
        for w in 0..p.words {
            st_relaxed_sys_u32(data.add(w as usize), handshake_word(p.seed, epoch, w));
        }
        st_release_sys_u32(flags, epoch);
        let site = WaitSite { rank: 0, role: 0, tile: i, what: WAIT_FLAG };
        if wait_flag_sys_u32(flags.add(1), epoch, p.timeout_ns, diag, site).is_err() {
            return;
        }
        *out.add(i as usize) = ld_relaxed_sys_u32(data.add(p.words as usize));
    }
}

/// Every block writes `rank | nranks << 8 | cluster_id << 16`.
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_cluster_ids(p: ClusterIdsParams) {
    if thread_idx_x() == 0 {
        let v = cluster_ctarank() | (cluster_nctarank() << 8) | (cluster_id_x() << 16);
        *(p.out as *mut u32).add(block_idx_x() as usize) = v;
    }
    cluster_sync();
}

/// Exercise the FIFO from the GPU (see [`FifoTestParams`]).
///
/// # Safety
/// Launched only by tests/gpu_selftest.rs (through host/gpu), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_fifo_push_test(p: FifoTestParams) {
    let diag = &p.diag;
    let gtid = block_idx_x() * block_dim_x() + thread_idx_x();
    let site = WaitSite { rank: 0, role: 2, tile: gtid, what: WAIT_FLAG };
    if p.mode == FIFO_TEST_THROUGHPUT {
        for i in 0..p.per_thread {
            let id = ((gtid as u64) << 32) | i as u64;
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_WRITE, 0, gtid & 0xffff, 0),
                src: FifoCmd::loc(BUF_HEAP, id),
                // Offset + length stay inside the 48-bit offset space (the proxy checks it).
                dst: FifoCmd::loc(BUF_HEAP, !id & 0x7fff_ffff_ffff),
                bytes: (id ^ 0x5555_5555) & 0xffff_ffff,
                flag: FifoCmd::loc(BUF_HEAP, gtid as u64),
                flag_value: id.rotate_left(17),
                pushed_ns: 0,
                _reserved: 0,
            };
            if crate::comm::fifo_push(&p.fifo, cmd, p.timeout_ns, diag, site).is_err() {
                return;
            }
        }
    } else if gtid == 0 {
        let reply = p.reply_flag as *const u32;
        let out = p.out as *mut u64;
        for i in 0..p.per_thread {
            let value = i + 1;
            let t0 = globaltimer_ns();
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_SIGNAL, 0, 0, 0),
                src: 0,
                dst: 0,
                bytes: 0,
                flag: FifoCmd::loc(BUF_HEAP, 0),
                flag_value: value as u64,
                pushed_ns: 0,
                _reserved: 0,
            };
            if crate::comm::fifo_push(&p.fifo, cmd, p.timeout_ns, diag, site).is_err() {
                return;
            }
            if wait_flag_sys_u32(reply, value, p.timeout_ns, diag, site).is_err() {
                return;
            }
            *out.add(i as usize) = globaltimer_ns() - t0;
        }
    }
}

/// The stream-wait probe (see [`ProbeRaiseParams`]): launched with one CTA per SM, thread 0 of
/// CTA 0 raises the word on its timetable and stamps each raise; thread 0 of every other CTA
/// holds its SM until the last raise's stamp.
///
/// # Safety
/// Launched only by `bench::stream_wait` (through host/gpu), which makes every address in `p`
/// valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_probe_raise(p: ProbeRaiseParams) {
    if thread_idx_x() != 0 {
        return;
    }
    let word = p.word as *mut u32;
    let stamps = p.stamps as *mut u64;
    let last = stamps.add(p.raises as usize);
    if block_idx_x() == 0 {
        let start = globaltimer_ns();
        *stamps = start;
        for i in 1..=p.raises {
            while globaltimer_ns() < start + i as u64 * p.period_ns as u64 {}
            st_release_sys_u32(word, i);
            let at = globaltimer_ns();
            if i == p.raises {
                st_release_gpu_u64(last, at);
            } else {
                *stamps.add(i as usize) = at;
            }
        }
    } else {
        // The last stamp (device memory, zeroed before the launch): polling the word itself
        // would flood the link to host memory when it lives there.
        while ld_acquire_gpu_u64(last) == 0 {
            nanosleep(1000);
        }
    }
}
