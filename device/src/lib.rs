//! mkernel's device crate.
//!
//! Built twice: for `nvptx64-nvidia-cuda` (sm_90a PTX, through rustc's own NVPTX backend; see the
//! README for why not Rust-CUDA's `cuda_builder`) and for the host as an rlib, so that every struct
//! both sides see (`abi`) and all pure integer logic (`sched`, `tile`) has exactly one definition.
#![no_std]
#![warn(missing_docs)]
// Device waits return `Result<(), ()>` (`sync::WaitResult`): `Err` only says "give up", the wait
// has already written its report to the diagnostics block.
#![allow(clippy::result_unit_err)]
#![cfg_attr(target_arch = "nvptx64", feature(abi_ptx, asm_experimental_arch))]

pub mod abi;
pub mod attn_tiles;
pub mod sched;
pub mod tile;

#[cfg(target_arch = "nvptx64")]
#[macro_use]
mod unroll;
#[cfg(target_arch = "nvptx64")]
pub mod arch;
#[cfg(target_arch = "nvptx64")]
pub mod attention;
#[cfg(target_arch = "nvptx64")]
pub mod comm;
#[cfg(target_arch = "nvptx64")]
pub mod gemm;
#[cfg(target_arch = "nvptx64")]
pub mod kernels;
#[cfg(target_arch = "nvptx64")]
pub mod pipeline;
#[cfg(target_arch = "nvptx64")]
pub mod trace;

/// Launch constants of the kernels, visible to the host (which sizes grids and shared memory).
pub mod kernels_info {
    /// The GEMM engine's tile and launch shape. A tile is `TILE_M` rows (two consumer
    /// warpgroups of 64) by a width of 64, 128, 192, 224 or 256 columns (the consumers' wgmma
    /// N): the fused kernels and the compute-bound GEMM use [`TILE_N`](gemm::TILE_N), the
    /// memory-bound GEMMs the width whose tile count fills the GPU, and 192 or 224 columns
    /// shapes whose 256-column tiles leave a last wave mostly idle (224 divides Llama's 14336
    /// and 28672; see the host's `ops::gemm::default_tile_n`).
    pub mod gemm {
        /// Output tile rows.
        pub const TILE_M: u32 = 128;
        /// Output tile columns of the fused kernels and the compute-bound GEMM (the widest
        /// wgmma N).
        pub const TILE_N: u32 = 256;
        /// Every tile width the engine is built for, narrowest first.
        pub const TILE_WIDTHS: [u32; 5] = [64, 128, 192, 224, 256];
        /// K elements per pipeline stage (one 128-byte swizzle row of bf16).
        pub const TILE_K: u32 = 64;
        /// Depth of the shared-memory ring of the compute-bound kernels: three stages leave room
        /// for the consumers' bf16 staging tiles (TMA stores that drain under the next tile).
        pub const STAGES: u32 = 3;
        /// Depth of the [`TILE_N`]-wide ring of the memory-bound kernels (the small-M GEMMs:
        /// split-K, stream-K, one tile row): [`deep_stages`] of it, four stages, no staging
        /// tiles (their stores go straight from registers). A consumer holds the stage it
        /// multiplies, so loads in flight go from two stages to three.
        pub const DEEP_STAGES: u32 = deep_stages(TILE_N);
        /// Threads per CTA: one producer and two consumer warpgroups.
        pub const THREADS: u32 = 384;
        pub(crate) const A_STAGE_BYTES: u32 = TILE_M * TILE_K * 2;
        /// Rows of A's TMA box (and of an A stage that loads fill) for a GEMM of `m` rows: the
        /// whole tile height, or `m` rounded up to 8 when the matrix is shorter. The TMA unit
        /// fills a box's rows past the matrix with zeros, and at decode sizes that fill cost
        /// more than the loads (measured on H200, docs/PERF.md); stage rows past the box hold
        /// stale data, which only reaches accumulator rows past `m`, and those are never stored.
        pub const fn a_box_rows(m: u32) -> u32 {
            if m >= TILE_M {
                TILE_M
            } else if m <= 8 {
                8
            } else {
                m.next_multiple_of(8)
            }
        }
        /// Bytes one k-block stage brings in: A's box of `a_rows` rows and a `tile_n`-wide B,
        /// `[K, N]` (`kn`) or `[N, K]`. A `[K, N]` B comes in boxes of 64 columns (one 128-byte
        /// swizzle row each), so a width that is not a multiple of 64 loads the last box whole;
        /// an `[N, K]` B is one box of `tile_n` rows.
        pub const fn stage_tx_bytes(a_rows: u32, tile_n: u32, kn: bool) -> u32 {
            let b_rows = if kn { 64 * kn_boxes(tile_n) } else { tile_n };
            a_rows * TILE_K * 2 + b_rows * TILE_K * 2
        }
        /// TMA boxes of 64 columns (one 128-byte swizzle row each) a `[K, N]` B stage of a
        /// `tile_n`-wide tile loads: the last one whole when `tile_n` is not a multiple of 64.
        pub const fn kn_boxes(tile_n: u32) -> u32 {
            tile_n.div_ceil(64)
        }
        /// Bytes of one B stage of a `tile_n`-wide tile: room for either layout's loads.
        pub(crate) const fn b_stage_bytes(tile_n: u32) -> u32 {
            stage_tx_bytes(0, tile_n, true)
        }
        /// Bytes of one consumer warpgroup's bf16 staging tile (64 rows of `tile_n`).
        pub(crate) const fn c_wg_bytes(tile_n: u32) -> u32 {
            64 * tile_n * 2
        }
        /// Bytes after the barriers: 16 of scratch words (`scratch_off`), then the epilogue
        /// handoff barriers, four of 8 bytes per consumer warpgroup (`handoff_off`), then the
        /// ring that publishes claimed tiles (`tile_ring_off`).
        const TAIL_BYTES: u32 = 16 + 2 * 4 * 8 + TILE_RING_BYTES;
        /// The ring through which a dynamic walk's producer thread hands the positions it
        /// claims to the rest of the CTA: a two-slot pipeline's barriers and a word per slot.
        pub const TILE_RING_BYTES: u32 = 2 * 2 * 8 + 2 * 4;
        const LIMIT: u32 = 227 * 1024;

        // The layout of the engine's dynamic shared memory for a ring of `stages` and tiles
        // `tile_n` wide: A stages, B stages, the consumers' C staging tiles when they fit, the
        // ring's barriers, the scratch words, the handoff barriers.
        /// Whether the two consumers' bf16 staging tiles fit beside a ring of `stages`. Their
        /// TMA stores go out in whole 64 x 64 boxes, so a width that is not a multiple of 64
        /// (224) has none: its last box would overwrite the next tile's columns.
        pub const fn has_c_staging(stages: u32, tile_n: u32) -> bool {
            tile_n.is_multiple_of(64)
                && stages * (A_STAGE_BYTES + b_stage_bytes(tile_n)) + 2 * c_wg_bytes(tile_n) + 16 * stages + TAIL_BYTES
                    <= LIMIT
        }
        /// The deepest ring of `tile_n`-wide tiles that fits without staging tiles: 4 stages at
        /// 256 and 224 columns, 5 at 192, 7 at 128, 9 at 64. Memory-bound kernels keep as many
        /// loads in flight as shared memory holds.
        pub const fn deep_stages(tile_n: u32) -> u32 {
            (LIMIT - TAIL_BYTES) / (A_STAGE_BYTES + b_stage_bytes(tile_n) + 16)
        }
        pub(crate) const fn b_off(stages: u32) -> u32 {
            stages * A_STAGE_BYTES
        }
        pub(crate) const fn c_off(stages: u32, tile_n: u32) -> u32 {
            b_off(stages) + stages * b_stage_bytes(tile_n)
        }
        pub(crate) const fn bar_off(stages: u32, tile_n: u32) -> u32 {
            c_off(stages, tile_n) + if has_c_staging(stages, tile_n) { 2 * c_wg_bytes(tile_n) } else { 0 }
        }
        /// A few bytes after the barriers for a kernel's per-launch values (its epoch, split-K's
        /// last-arriver words), written by thread 0 before the engine's first block barrier.
        pub const fn scratch_off(stages: u32, tile_n: u32) -> u32 {
            bar_off(stages, tile_n) + 2 * stages * 8
        }
        /// The epilogue handoff barriers (`gemm::epilogue::Handoff`).
        pub(crate) const fn handoff_off(stages: u32, tile_n: u32) -> u32 {
            scratch_off(stages, tile_n) + 16
        }
        /// The claimed-tile ring (`gemm::feed`).
        pub(crate) const fn tile_ring_off(stages: u32, tile_n: u32) -> u32 {
            handoff_off(stages, tile_n) + 2 * 4 * 8
        }
        /// Dynamic shared memory of the engine with a ring of `stages` and `tile_n`-wide tiles.
        pub const fn smem_bytes(stages: u32, tile_n: u32) -> u32 {
            tile_ring_off(stages, tile_n) + TILE_RING_BYTES
        }
        /// Dynamic shared memory of the deep ring of `tile_n`-wide tiles.
        pub const fn deep_smem_bytes(tile_n: u32) -> u32 {
            smem_bytes(deep_stages(tile_n), tile_n)
        }
        /// Bytes of one consumer warpgroup's f32 partial of a `tile_n`-wide tile (64 x `tile_n`)
        /// in a split-K workspace.
        pub const fn split_half_bytes(tile_n: u32) -> u32 {
            64 * tile_n * 4
        }
        /// [`scratch_off`] of the [`STAGES`] ring.
        pub const SCRATCH_OFF: u32 = scratch_off(STAGES, TILE_N);
        /// Dynamic shared memory of the [`STAGES`] ring.
        pub const SMEM_BYTES: u32 = smem_bytes(STAGES, TILE_N);
        /// Where the side threads' shared memory starts (`InputGate::SIDE`): past the engine's
        /// layout of a ring of `stages`.
        pub const fn side_off(stages: u32, tile_n: u32) -> u32 {
            smem_bytes(stages, tile_n).next_multiple_of(128)
        }
        /// The side threads' shared memory: AllGather + GEMM's `spread` keeps where its copies
        /// go there (two tables of eight addresses) and a verdict word.
        pub const SIDE_BYTES: u32 = 256;
        /// Dynamic shared memory of the [`STAGES`] ring with the side threads' after it.
        pub const SIDE_SMEM_BYTES: u32 = side_off(STAGES, TILE_N) + SIDE_BYTES;
        const _: () = assert!(SIDE_SMEM_BYTES <= LIMIT);
        /// Dynamic shared memory of the [`DEEP_STAGES`] ring.
        pub const DEEP_SMEM_BYTES: u32 = deep_smem_bytes(TILE_N);
        // The comm CTAs of fused kernels run a bulk-copy ring in the same shared memory.
        const _: () = assert!(super::allgather::BULK_SMEM_BYTES <= SMEM_BYTES);
        const _: () = assert!(has_c_staging(STAGES, TILE_N) && !has_c_staging(DEEP_STAGES, TILE_N));
        const _: () = assert!(
            DEEP_STAGES == 4
                && deep_stages(224) == 4
                && deep_stages(192) == 5
                && deep_stages(128) == 7
                && deep_stages(64) == 9
        );
        const _: () = {
            let mut i = 0;
            while i < TILE_WIDTHS.len() {
                let w = TILE_WIDTHS[i];
                assert!(deep_smem_bytes(w) <= LIMIT && !has_c_staging(deep_stages(w), w));
                // B stages stay 1024-byte aligned (the swizzle atom); wgmma N is a multiple of 8
                // up to 256, and a width in 32-column steps fills whole core matrices.
                assert!(b_stage_bytes(w).is_multiple_of(1024) && w.is_multiple_of(32) && w <= 256);
                i += 1;
            }
        };
        const _: () = assert!(SMEM_BYTES <= LIMIT);
    }

    /// The flash-attention forward's tile and launch shape (per head dimension `d`, 64 or 128).
    pub mod attention {
        /// Consumer warpgroups (64 query rows each) with head dimension `d`. Two at 128: each
        /// holds S, P and O in 232 registers. Three at 64: S, P and O fit in 160, and since the
        /// softmax there takes as long as the products (half the product per score, and the
        /// exponentials run at 16 per SM per clock), a third warpgroup's products keep the tensor
        /// cores busy while the other two exponentiate.
        pub const fn consumers(d: u32) -> u32 {
            if d <= 64 {
                3
            } else {
                2
            }
        }
        /// Query rows per tile: 64 per consumer warpgroup.
        pub const fn block_m(d: u32) -> u32 {
            64 * consumers(d)
        }
        /// Threads per CTA: one producer warpgroup and the consumers.
        pub const fn threads(d: u32) -> u32 {
            128 * (1 + consumers(d))
        }
        /// Key/value rows per block.
        pub const BLOCK_N: u32 = 128;
        /// Depth of the K ring and of the V ring.
        pub const STAGES: u32 = 2;
        /// Q tiles in flight: the producer loads the next unit's Q (and first K/V blocks) while
        /// the consumers finish the current one.
        pub const Q_STAGES: u32 = 2;
        /// Bytes of the Q tile (also the O staging tile).
        pub const fn q_bytes(d: u32) -> u32 {
            block_m(d) * d * 2
        }
        /// Bytes of one K (or V) block.
        pub const fn kv_bytes(d: u32) -> u32 {
            BLOCK_N * d * 2
        }
        /// Offset of the barriers: the Q stages, then the K stages, then the V stages.
        pub const fn bar_off(d: u32) -> u32 {
            Q_STAGES * q_bytes(d) + 2 * STAGES * kv_bytes(d)
        }
        /// Offset of the words (one per Q stage) through which the producer tells the consumers
        /// which unit of work (step and tile) a Q tile belongs to: after the barriers.
        pub const fn unit_off(d: u32) -> u32 {
            bar_off(d) + 16 * (2 * STAGES + Q_STAGES)
        }
        /// Dynamic shared memory of a launch with head dimension `d`: the tiles, a full and an
        /// empty barrier per K, V and Q stage, then the unit words.
        pub const fn smem_bytes(d: u32) -> u32 {
            unit_off(d) + 4 * Q_STAGES.next_multiple_of(4)
        }
        const _: () = assert!(smem_bytes(128) <= 227 * 1024);
        /// Dynamic shared memory of a ring-attention launch: the attention CTAs' or the comm
        /// CTAs' bulk-copy ring, whichever is larger, then 16 bytes for the launch epoch.
        pub const fn ring_smem_bytes(d: u32) -> u32 {
            let a = smem_bytes(d);
            let b = super::allgather::BULK_SMEM_BYTES;
            (if a > b { a } else { b }).next_multiple_of(16) + 16
        }
        const _: () = assert!(ring_smem_bytes(128) <= 227 * 1024);
    }

    /// The all-gather's copy CTAs.
    pub mod allgather {
        /// Threads per CTA.
        pub const THREADS: u32 = 512;
        /// Bytes per TMA bulk copy (`COPY_BULK`). Chosen on 2x H200 (docs/PERF.md): 16 KiB x 12
        /// stages with 6 loads ahead beat 32 KiB x 6 and 8 KiB x 24 at every split of the ring.
        pub const BULK_CHUNK: u32 = 16 << 10;
        /// Shared-memory stages of the bulk ring.
        pub const BULK_STAGES: u32 = 12;
        /// Chunks loaded ahead of the store in progress (the rest of the ring holds stores).
        pub const BULK_AHEAD: u32 = 6;
        /// Dynamic shared memory of a `COPY_BULK` launch: the stages, then a full and an empty
        /// barrier per stage (the pipeline's layout; the ring uses the full ones).
        pub const BULK_SMEM_BYTES: u32 = BULK_CHUNK * BULK_STAGES + 16 * BULK_STAGES;
        const _: () = assert!(BULK_SMEM_BYTES <= 227 * 1024);
    }
}
#[cfg(target_arch = "nvptx64")]
pub mod sync;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Kernels are written so that nothing panics (no bounds-checked indexing on hot paths);
    // if something does, stop the grid loudly instead of spinning.
    arch::trap()
}
