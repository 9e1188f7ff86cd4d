//! What a consumer warpgroup does with its finished accumulators. [`StoreC`] stores them into C
//! (bf16 through swizzled shared memory and TMA stores, or f32 straight from registers); fused
//! kernels implement [`Epilogue`] to send, reduce or publish tiles instead, and may give each
//! consumer warpgroup a helper thread ([`Handoff`]) that does the waiting for them.
use super::mainloop::{Acc256, Accumulators, Smem};
use crate::arch::*;
use crate::kernels_info::gemm::*;
use crate::sched::{div_nz, KSplit, Tile};
use crate::tile::*;

/// A finished tile's way out, for tiles as wide as the accumulators `A` (the fused kernels'
/// epilogues take the default, 256 columns).
pub trait Epilogue<A: Accumulators = Acc256> {
    /// Whether the epilogue has helper threads: then the engine runs [`Epilogue::help`] for every
    /// tile on one thread per consumer warpgroup in the producer warpgroup (lane 0 of warps 1
    /// and 2), alongside that warpgroup's [`Epilogue::store`]s.
    const HELPER: bool = false;

    /// Thread 0 of the CTA, before the engine's first block barrier: set up shared-memory state
    /// (the helpers' [`Handoff`] barriers).
    ///
    /// # Safety
    /// Called once, by one thread, before any other method.
    unsafe fn init<const ST: u32>(&self, _smem: &Smem<ST, A>) {}

    /// Consumer warpgroup `cwg`'s 128 threads (`t` is this one) write its 64 rows of `tile`, the
    /// warpgroup's `n`-th (0, 1, ...), whose accumulators are `acc` (the wgmma layout, see
    /// `arch::wgmma`; the epilogue may use them as scratch: the next tile's first product
    /// overwrites them).
    ///
    /// # Safety
    /// All 128 threads call it together; the output locations the epilogue knows are valid.
    unsafe fn store<const ST: u32>(&self, smem: &Smem<ST, A>, acc: &mut A, tile: Tile, n: u32, cwg: u32, t: u32);

    /// Thread 0 of each consumer warpgroup, after its last tile: let outstanding writes finish.
    ///
    /// # Safety
    /// Called once, after every `store` of this warpgroup.
    unsafe fn finish(&self, _cwg: u32) {
        bulk_wait_group::<0>();
    }

    /// With [`Epilogue::HELPER`]: warpgroup `cwg`'s helper thread, for the warpgroup's `n`-th
    /// tile `tile`, in order.
    ///
    /// # Safety
    /// Called by the helper thread only, once per tile of its warpgroup, in tile order.
    unsafe fn help<const ST: u32>(&self, _smem: &Smem<ST, A>, _tile: Tile, _n: u32, _cwg: u32) {}

    /// With [`Epilogue::HELPER`]: the helper thread after its last tile.
    ///
    /// # Safety
    /// Called once, after every `help` of this helper.
    unsafe fn help_finish(&self, _cwg: u32) {}
}

/// The handoff between a consumer warpgroup and its epilogue helper thread: mbarriers of one
/// arrival each (`staged`: 128, below), completing once per tile (phase `n` for the warpgroup's
/// `n`-th tile), so the consumers never wait out a remote flag, a fence or a copy themselves:
/// - `ready`: the helper saw the tile's inputs arrive (the consumers may read them);
/// - `staged`: the consumers wrote and fenced the staging tile (the helper may copy it out; all
///   128 consumer threads arrive, each releasing its own stores);
/// - `free`: the helper's copies finished reading the staging tile (it may be rewritten).
///
/// A side is never more than one phase ahead of the other: the helper arrives `ready` for tile
/// `n + 1` only after `staged` of tile `n`, and `free` of tile `n` only after its `staged`; a
/// consumer that waits on `ready` only at some tiles must know the helper is not two phases
/// behind (GEMM + RS: `ready` of tile `n + 1` arrives before `free` of tile `n`). An
/// epilogue may stage twice per tile if both sides agree (the one-shot all-reduce: partial, then
/// sum; `staged` then completes phases `2n` and `2n + 1`, and `ready` comes between them).
#[derive(Clone, Copy)]
pub struct Handoff {
    base: u32,
}

impl Handoff {
    /// Warpgroup `cwg`'s barriers.
    #[inline(always)]
    pub const fn of<const ST: u32, A: Accumulators>(smem: &Smem<ST, A>, cwg: u32) -> Self {
        Self { base: smem.handoff() + cwg * 32 }
    }
    /// The helper saw the inputs.
    #[inline(always)]
    pub const fn ready(&self) -> u32 {
        self.base
    }
    /// The staging tile is written.
    #[inline(always)]
    pub const fn staged(&self) -> u32 {
        self.base + 8
    }
    /// The staging tile may be rewritten.
    #[inline(always)]
    pub const fn free(&self) -> u32 {
        self.base + 16
    }
    /// The helper's own loads into the staging tile landed (its transaction barrier).
    #[inline(always)]
    pub const fn loaded(&self) -> u32 {
        self.base + 24
    }
    /// One thread, before the block barrier that precedes any use.
    ///
    /// # Safety
    /// The barriers are in this CTA's dynamic shared memory and not yet in use.
    #[inline(always)]
    pub unsafe fn init(&self) {
        mbarrier_init(self.ready(), 1);
        // Every consumer thread arrives (each releases its own stores to the staging tile).
        mbarrier_init(self.staged(), 128);
        mbarrier_init(self.free(), 1);
        mbarrier_init(self.loaded(), 1);
    }
}

/// Split-K: each unit's f32 partial goes to a workspace, and the tile's units sum them, in
/// split order, either all together (each its share of the chunks) or the last to arrive alone,
/// then store the tile (see [`crate::abi::SplitKParams`] for the layout and protocol).
pub struct SplitKStore<'a, K> {
    /// Where a whole tile goes (the last-arriver sum).
    pub inner: StoreC,
    /// The units (to tell a unit's tile and slot, and a tile's unit count): split-K or
    /// stream-K.
    pub sched: K,
    /// f32 partials, `[2 x tiles][slots]` half tiles.
    pub workspace: u64,
    /// Arrival counter per half tile.
    pub counters: u64,
    /// Every unit has its own CTA: the units of a tile sum together.
    pub parallel: bool,
    /// This launch's epoch.
    pub epoch: u32,
    /// Not `parallel`: the last arriver takes the tile's arrivals back off its counter, so every
    /// launch counts from zero and `epoch` is not used (for kernels whose launch counter also
    /// counts launches that run no split units). As with the tile counters of a drawn walk, a
    /// launch abandoned mid-way (a wait that timed out, reported to the host) leaves them as
    /// they are: build the op again after such an error.
    pub reset: bool,
    /// Where the shared sums' wait reports.
    pub bound: crate::sync::Bound<'a>,
}

impl<K: KSplit> SplitKStore<'_, K> {
    /// Half tile `half`'s partial of slot `s`, for tiles as wide as `A`.
    #[inline(always)]
    fn partial<A: Accumulators>(&self, half: u32, s: u32) -> *const [u32; 4] {
        let at = (half * self.sched.slots() + s) as u64 * split_half_bytes(A::N) as u64;
        (self.workspace + at) as *const [u32; 4]
    }

    /// This unit's share of the half tile: chunks `CHUNKS split / splits ..` of every thread, each
    /// summed over the splits in order and stored straight into C (rows and columns as
    /// [`StoreC::put_pair`] places them, clipped to the matrix). Few registers: the
    /// accumulators stay reserved for the next unit's wgmma.
    #[inline(always)]
    unsafe fn sum_share<A: Accumulators>(&self, half: u32, split: u32, splits: u32, tile: Tile, cwg: u32, t: u32) {
        let c = &self.inner;
        let mut j = div_nz(A::CHUNKS * split, splits);
        let end = div_nz(A::CHUNKS * (split + 1), splits);
        while j < end {
            let first = ld_global_v4_u32(self.partial::<A>(half, 0).add((j * 128 + t) as usize));
            let mut v = [0f32; 4];
            for i in 0..4 {
                v[i] = f32::from_bits(first[i]);
            }
            for s in 1..splits {
                let x = ld_global_v4_u32(self.partial::<A>(half, s).add((j * 128 + t) as usize));
                for i in 0..4 {
                    v[i] += f32::from_bits(x[i]);
                }
            }
            // Chunk j holds accumulators 4j..4j+4: a column pair in one row, the same pair 8
            // rows down.
            let (r, cc) = wgmma_acc_coord(t, 4 * j);
            let (row, col) = (tile.m * TILE_M + cwg * 64 + r, tile.n * A::N + cc);
            c.put_pair(row, col, v[0], v[1]);
            c.put_pair(row + 8, col, v[2], v[3]);
            j += 1;
        }
    }
}

impl<A: Accumulators, K: KSplit> Epilogue<A> for SplitKStore<'_, K> {
    #[inline(always)]
    unsafe fn store<const ST: u32>(&self, smem: &Smem<ST, A>, acc: &mut A, tile: Tile, n: u32, cwg: u32, t: u32) {
        if tile.m * TILE_M + cwg * 64 >= self.inner.m {
            // This warpgroup's rows are all past the matrix (M <= 64 at decode sizes): nothing
            // to store, so no partial to write or sum (every split agrees).
            return;
        }
        let (out_tile, split) = self.sched.unit(tile.index);
        let half = 2 * out_tile + cwg;
        let bar = 1 + cwg;
        // My partial, thread t's j-th 16 bytes at (j * 128 + t) * 16: each warp store writes
        // 512 contiguous bytes.
        let mine = self.partial::<A>(half, split) as *mut [u32; 4];
        macro_rules! put {
            ($j:expr) => {
                st_global_v4_u32(
                    mine.add($j * 128 + t as usize),
                    [
                        acc[4 * $j].to_bits(),
                        acc[4 * $j + 1].to_bits(),
                        acc[4 * $j + 2].to_bits(),
                        acc[4 * $j + 3].to_bits(),
                    ],
                );
            };
        }
        unroll_below!(A::CHUNKS, put);
        // Every thread's stores, then one arrival for all of them; the acquire that sees the
        // last arrival makes every split's stores visible to this warpgroup.
        fence_acq_rel_gpu();
        named_barrier_sync(bar, 128);
        let counter = (self.counters as *mut u32).add(half as usize);
        let splits = self.sched.arrivals(out_tile);
        let complete = self.epoch.wrapping_mul(splits);
        if self.parallel {
            if t == 0 {
                atom_add_acq_rel_gpu_u32(counter, 1);
                // Every unit of the tile is running (one CTA each): a bounded wait for them.
                let _ = self.bound.flag(counter, complete, tile.index);
            }
            named_barrier_sync(bar, 128);
            self.sum_share::<A>(half, split, splits, tile, cwg, t);
            return;
        }
        let last_word = smem.scratch() + 4 + 4 * cwg;
        if t == 0 {
            let complete = if self.reset { splits } else { complete };
            let last = atom_add_acq_rel_gpu_u32(counter, 1).wrapping_add(1) == complete;
            if last && self.reset {
                // Every unit of the tile has arrived: nothing else touches the counter this launch.
                atom_add_acq_rel_gpu_u32(counter, splits.wrapping_neg());
            }
            st_shared_u32(last_word, last as u32);
        }
        named_barrier_sync(bar, 128);
        if ld_shared_u32(last_word) == 0 {
            return;
        }
        // The sum in split order, accumulated in place: split 0 loaded straight into the
        // accumulators, then each later split added 16 chunks at a time (64 registers of loads
        // in flight next to the 128 accumulators).
        let first = self.partial::<A>(half, 0);
        macro_rules! load {
            ($j:expr) => {{
                let w = ld_global_v4_u32(first.add($j * 128 + t as usize));
                for i in 0..4 {
                    acc[4 * $j + i] = f32::from_bits(w[i]);
                }
            }};
        }
        unroll_below!(A::CHUNKS, load);
        for s in 1..splits {
            let src = self.partial::<A>(half, s);
            macro_rules! add {
                ($j:expr) => {{
                    let w = ld_global_v4_u32(src.add($j * 128 + t as usize));
                    for i in 0..4 {
                        acc[4 * $j + i] += f32::from_bits(w[i]);
                    }
                }};
            }
            unroll_below!(A::CHUNKS, add);
        }
        self.inner.store(smem, acc, tile, n, cwg, t);
    }
}

/// Units that are whole tiles ([`KSplit::whole`]: a [`crate::sched::TailSplit`]'s first waves)
/// stored by `split.inner`, the others summed through [`SplitKStore`] (whose last arriver stores
/// the tile the same way).
pub struct TailStore<'a, K> {
    /// The partial sums; `split.sched` is the walk.
    pub split: SplitKStore<'a, K>,
}

impl<A: Accumulators, K: KSplit> Epilogue<A> for TailStore<'_, K> {
    #[inline(always)]
    unsafe fn store<const ST: u32>(&self, smem: &Smem<ST, A>, acc: &mut A, tile: Tile, n: u32, cwg: u32, t: u32) {
        if self.split.sched.whole(tile.index) {
            self.split.inner.store(smem, acc, tile, n, cwg, t);
        } else {
            self.split.store(smem, acc, tile, n, cwg, t);
        }
    }
}

/// Store C `[m, n]` locally: bf16 through `c_map` (TMA stores that drain under the next tile's
/// mainloop) when the ring leaves room for staging tiles, else bf16 or f32 pairs straight from
/// the registers to `c`.
#[derive(Clone, Copy)]
pub struct StoreC {
    /// Device address of C's bf16 tensor map (64 x 64 boxes, 128-byte swizzle; unused when
    /// `out_f32` or without staging tiles).
    pub c_map: u64,
    /// Device address of C: f32 when `out_f32`, else bf16.
    pub c: u64,
    /// Rows of C (edge tiles are clipped to it).
    pub m: u32,
    /// Columns of C (edge tiles are clipped to it).
    pub n: u32,
    /// f32 output rather than bf16.
    pub out_f32: bool,
}

impl StoreC {
    /// C as a GEMM's parameter block describes it.
    #[inline(always)]
    pub fn of(p: &crate::abi::GemmParams) -> Self {
        StoreC { c_map: p.c_map, c: p.c, m: p.m, n: p.n, out_f32: p.out_f32 != 0 }
    }

    /// Store the column pair `(x, y)` at `(row, col)` of C (`col` even), if inside the matrix:
    /// `n` is a multiple of 8, so a pair that starts inside it ends inside it.
    ///
    /// # Safety
    /// `c` holds `m * n` elements of the output type.
    #[inline(always)]
    pub unsafe fn put_pair(&self, row: u32, col: u32, x: f32, y: f32) {
        if row < self.m && col < self.n {
            let at = (row as usize * self.n as usize + col as usize) / 2;
            if self.out_f32 {
                *(self.c as *mut [f32; 2]).add(at) = [x, y];
            } else {
                *(self.c as *mut u32).add(at) = pack_bf16x2(x, y);
            }
        }
    }

    /// Warpgroup `cwg`'s 64 rows of `tile` straight from the registers, a column pair per store,
    /// clipped to the matrix.
    ///
    /// # Safety
    /// All 128 threads of the warpgroup call it (`t` is this one); `c` is valid as for
    /// [`StoreC::put_pair`].
    #[inline(always)]
    pub unsafe fn store_direct<A: Accumulators>(&self, acc: &A, tile: Tile, cwg: u32, t: u32) {
        let (r0, c0) = (tile.m * TILE_M + cwg * 64, tile.n * A::N);
        macro_rules! put {
            ($j:expr) => {{
                let (r, c) = wgmma_acc_coord(t, 4 * $j);
                self.put_pair(r0 + r, c0 + c, acc[4 * $j], acc[4 * $j + 1]);
                self.put_pair(r0 + r + 8, c0 + c, acc[4 * $j + 2], acc[4 * $j + 3]);
            }};
        }
        unroll_below!(A::CHUNKS, put);
    }
}

impl<A: Accumulators> Epilogue<A> for StoreC {
    #[inline(always)]
    unsafe fn store<const ST: u32>(&self, smem: &Smem<ST, A>, acc: &mut A, tile: Tile, _n: u32, cwg: u32, t: u32) {
        if Smem::<ST, A>::HAS_C && !self.out_f32 {
            stage_bf16(smem.c(cwg), acc, cwg, t);
            if t == 0 {
                tma_store_cols::<A>(self.c_map, smem.c(cwg), self.m, self.n, tile, cwg);
            }
        } else {
            self.store_direct(acc, tile, cwg, t);
        }
    }
}

/// Round the accumulators to bf16 into warpgroup `cwg`'s 64 x N staging tile `c` (N / 64 swizzled
/// 64 x 64 boxes), ready for TMA. The staging tile is rewritten only after the previous tile's
/// stores finished reading it; on return it is complete and fenced for the async proxy.
///
/// # Safety
/// All 128 threads of the warpgroup call it together.
#[inline(always)]
pub unsafe fn stage_bf16<A: Accumulators>(c: u32, acc: &A, cwg: u32, t: u32) {
    let bar_id = 1 + cwg;
    if t == 0 {
        bulk_wait_group_read::<0>();
    }
    named_barrier_sync(bar_id, 128);
    write_bf16(c, acc, t);
    fence_proxy_async_shared();
    named_barrier_sync(bar_id, 128);
}

/// The writes of [`stage_bf16`] alone: this thread's accumulators rounded to bf16 into the
/// staging tile `c`, which the caller made sure is free, and fences and announces afterwards.
///
/// # Safety
/// `c` is a warpgroup's staging tile that no copy still reads.
#[inline(always)]
pub unsafe fn write_bf16<A: Accumulators>(c: u32, acc: &A, t: u32) {
    let w = t / 32;
    let l = t % 32;
    // Opaque: the two dozen swizzled addresses below are then computed here, per tile, instead
    // of being hoisted out of the tile loop and held in registers across the mainloop, where
    // the accumulators need them.
    let (c, row) = (opaque_u32(c), opaque_u32(16 * w + l / 4));
    macro_rules! put {
        ($j:expr) => {{
            let col = 8 * $j + 2 * (l % 4);
            let chunk = c + (col / 64) * 64 * SW128_ROW_BYTES;
            let byte = (col % 64) * 2;
            st_shared_u32(chunk + swizzle128(row, byte), pack_bf16x2(acc[4 * $j], acc[4 * $j + 1]));
            st_shared_u32(chunk + swizzle128(row + 8, byte), pack_bf16x2(acc[4 * $j + 2], acc[4 * $j + 3]));
        }};
    }
    unroll_below!(A::CHUNKS, put);
}

/// Thread 0 of warpgroup `cwg`: TMA-store its staged 64 rows of `tile` through `map` (any map of
/// an `[m, n]` bf16 matrix with 64 x 64 boxes: local C, or a peer's buffer), clipped to the
/// matrix, as one bulk group.
///
/// # Safety
/// `map` is a valid tensor map; `c` was filled by [`stage_bf16`].
#[inline(always)]
pub unsafe fn tma_store_tile(map: u64, c: u32, m: u32, n: u32, tile: Tile, cwg: u32) {
    tma_store_cols::<Acc256>(map, c, m, n, tile, cwg);
}

/// Warpgroup `cwg`'s 64 rows of `tile` (as wide as `A`) as 64 x 64 boxes of an `[m, n]` matrix:
/// the first row and column, and how many boxes lie inside it (the columns' first boxes; none
/// when the rows start past `m`). The one place for the boxes TMA stores and loads a staged
/// half tile by.
#[inline(always)]
pub fn half_tile_boxes<A: Accumulators>(m: u32, n: u32, tile: Tile, cwg: u32) -> (u32, u32, u32) {
    let (m0, n0) = (tile.m * TILE_M + cwg * 64, tile.n * A::N);
    let boxes = if m0 < m { (0..A::N / 64).filter(|&j| n0 + 64 * j < n).count() as u32 } else { 0 };
    (m0, n0, boxes)
}

/// [`tma_store_tile`] for tiles as wide as `A`.
///
/// # Safety
/// As for [`tma_store_tile`].
#[inline(always)]
pub unsafe fn tma_store_cols<A: Accumulators>(map: u64, c: u32, m: u32, n: u32, tile: Tile, cwg: u32) {
    let (m0, n0, boxes) = half_tile_boxes::<A>(m, n, tile, cwg);
    // A constant trip count, so the stores unroll.
    for j in 0..A::N / 64 {
        if j < boxes {
            tma_store_2d(map, c + j * 64 * SW128_ROW_BYTES, (n0 + 64 * j) as i32, m0 as i32);
        }
    }
    bulk_commit_group();
}

/// f32 output: straight from registers, two columns per store, clipped to the matrix.
///
/// # Safety
/// `out` holds `m * n` f32.
#[inline(always)]
pub unsafe fn store_f32<A: Accumulators>(out: *mut f32, m: u32, n: u32, acc: &A, tile: Tile, cwg: u32, t: u32) {
    StoreC { c_map: 0, c: out as u64, m, n, out_f32: true }.store_direct(acc, tile, cwg, t);
}
