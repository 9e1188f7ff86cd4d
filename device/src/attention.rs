//! The flash-attention forward's pieces: where Q, K and V live in shared memory, how two
//! producer threads stream Q and K, and V (TMA, 128-byte swizzle, the framework's [`Pipeline`]),
//! and how a consumer warpgroup runs `S = Q K^T` (wgmma from shared memory), the online softmax
//! in fp32 and base 2, and `O += P V` (wgmma with P from registers). Which tiles a CTA takes and
//! which keys they see is `attn_tiles`.
//!
//! A tile is [`block_m`]`(D)` query rows of one (batch, head): 64 per consumer warpgroup
//! ([`consumers`]`(D)` of them), warpgroup `cwg` owning rows `64 cwg .. 64 cwg + 64`.
//! Accumulators follow the wgmma layout (`arch::wgmma`): thread `t` of a warpgroup holds rows
//! `r = 16 (t / 32) + (t % 32) / 4` and `r + 8`; `s[4j + i]` is row `r + 8 (i / 2)`, column
//! `8j + 2 (t % 4) + i % 2`. Row statistics (max, sum) are therefore shared by the 4 threads of a
//! quad.
use crate::abi::{AttnParams, SeqPos};
use crate::arch::*;
pub use crate::attn_tiles::{Geometry, Span, Units, Work};
use crate::kernels_info::attention::*;
use crate::pipeline::{PipeState, Pipeline};
use crate::sync::{stop, Bound, WaitResult};
use crate::tile::*;

/// Releases of each K and V block with head dimension `d`: every consumer warp, after its own
/// `wgmma.wait_group`.
const fn kv_releases(d: u32) -> u32 {
    4 * consumers(d)
}
/// Releases of a Q stage: every consumer thread, once it is done with the stage's Q, unit word
/// and O staging rows (an mbarrier arrival releases only the arriving thread's own accesses),
/// and the V producer once it read the unit word (a unit with no visible key, as in some causal
/// ring steps, never waits for V: without this the consumers could free the stage, and thread 0
/// rewrite its word, before the V producer read it).
const fn q_releases(d: u32) -> u32 {
    128 * consumers(d) + 1
}

/// Shared memory of an attention CTA with head dimension `D`.
#[derive(Clone, Copy)]
pub struct Smem<const D: u32> {
    /// Shared-memory address of the dynamic shared memory.
    pub base: u32,
}

impl<const D: u32> Smem<D> {
    /// Q tile of stage `s`: `D / 64` boxes of [`block_m`]`(D)` rows x 64 columns (swizzled), box
    /// `c` at `c * block_m(D) * 128` bytes. A consumer warpgroup stages its O rows in its own rows
    /// of it once Q is no longer needed.
    #[inline(always)]
    pub const fn q(&self, s: u32) -> u32 {
        self.base + s * q_bytes(D)
    }
    /// K block of stage `s` (laid out as Q, in boxes of [`BLOCK_N`] rows).
    #[inline(always)]
    pub const fn k(&self, s: u32) -> u32 {
        self.base + Q_STAGES * q_bytes(D) + s * kv_bytes(D)
    }
    /// V block of stage `s` (laid out as Q).
    #[inline(always)]
    pub const fn v(&self, s: u32) -> u32 {
        self.base + Q_STAGES * q_bytes(D) + (STAGES + s) * kv_bytes(D)
    }
    /// The K ring.
    #[inline(always)]
    pub const fn k_pipe(&self) -> Pipeline<STAGES> {
        Pipeline::at(self.base + bar_off(D))
    }
    /// The V ring.
    #[inline(always)]
    pub const fn v_pipe(&self) -> Pipeline<STAGES> {
        Pipeline::at(self.base + bar_off(D) + 16 * STAGES)
    }
    /// The Q ring (full: Q landed; empty: every consumer warpgroup stored its O rows).
    #[inline(always)]
    pub const fn q_pipe(&self) -> Pipeline<Q_STAGES> {
        Pipeline::at(self.base + bar_off(D) + 32 * STAGES)
    }

    /// The word naming the unit of work (see [`Units`]) of Q stage `s`.
    #[inline(always)]
    pub const fn unit(&self, s: u32) -> u32 {
        self.base + unit_off(D) + 4 * s
    }

    /// Initialise every barrier (one thread; a block barrier must follow).
    ///
    /// # Safety
    /// The shared memory is this CTA's and holds [`smem_bytes`]`(D)` bytes.
    #[inline(always)]
    pub unsafe fn init(&self) {
        self.k_pipe().init(kv_releases(D));
        self.v_pipe().init(kv_releases(D));
        self.q_pipe().init(q_releases(D));
    }
}

/// Producer: load `D / 64` boxes of `rows` rows starting at `row` of `map` into the tile at
/// `dst`, completing on `full`.
///
/// # Safety
/// `map` is a valid rank-4 tensor map with 64 x `rows` boxes; `full` expects the tile's bytes.
#[inline(always)]
unsafe fn load_tile<const D: u32>(
    g: &Geometry,
    (dst, rows): (u32, u32),
    map: u64,
    full: u32,
    (head, row, b): (u32, u32, u32),
) {
    for c in 0..D / 64 {
        tma_load_4d(dst + c * rows * SW128_ROW_BYTES, map, full, g.coords(64 * c, head, row, b));
    }
}

/// What changes from one step of a launch to the next: one step for plain attention; a ring's
/// steps each bring another rank's K and V.
pub trait KvSteps {
    /// Exactly one step, known at compile time: no tile merges into a running output, so the
    /// merge's code and registers drop out.
    const ONE_STEP: bool = false;
    /// Steps of the launch (at least 1).
    fn count(&self) -> u32;
    /// Tiles (of `tiles` per step) walked one step per unit, the rest one unit over all steps
    /// ([`Units`]): all of them unless the steps say otherwise.
    #[inline(always)]
    fn split(&self, tiles: u32) -> u32 {
        tiles
    }
    /// This launch's epoch (1, 2, ...; read by the producer thread only).
    fn epoch(&self) -> u32;
    /// Device addresses of step `s`'s K and V tensor maps.
    fn maps(&self, s: u32) -> (u64, u64);
    /// Positions of step `s`'s key rows.
    fn k_pos(&self, s: u32) -> SeqPos;
    /// A producer thread, before its first K (or V) load of step `s`: wait until the step's K and
    /// V may be read.
    ///
    /// # Safety
    /// Called by each of the two producer threads.
    unsafe fn wait_ready(&self, s: u32, b: &Bound<'_>) -> WaitResult;
    /// The producer thread that claimed a unit of step `s > 0`, before it loads the unit's Q,
    /// for each part of the tile (part `tile * consumers + cwg`: warpgroup `cwg`'s 64 rows):
    /// wait until step `s - 1` wrote that part of the running output (perhaps on another CTA).
    /// The consumers then acquire it through the Q stage's barrier, whose arrival comes after
    /// this wait: a flag that is long up (the usual case) costs them no round trip.
    ///
    /// # Safety
    /// Called by one thread per part and unit.
    unsafe fn before_merge(&self, s: u32, part: u32, b: &Bound<'_>) -> WaitResult;
    /// Thread 0 of a consumer warpgroup, after its warpgroup wrote `part` of the running output
    /// at step `s` (and met at a barrier), or left it as it was (no key of the unit's steps was
    /// visible; it acquired the step before's flag through Q): announce it.
    ///
    /// # Safety
    /// As [`KvSteps::before_merge`].
    unsafe fn after_store(&self, s: u32, part: u32);
    /// Thread 0 of a consumer warpgroup, once its part of a tile of step `s` is finished (every
    /// K/V load it waited for has landed, so the step's K and V were read); a step has `parts`.
    ///
    /// # Safety
    /// Called once per part.
    unsafe fn part_done(&self, s: u32, parts: u32);
}

/// Plain attention: one step, K and V from the parameter block.
pub struct OneStep<'a> {
    /// The launch's parameters.
    pub p: &'a AttnParams,
    /// The launch's epoch (valid on the producer thread).
    pub epoch: u32,
}

impl KvSteps for OneStep<'_> {
    const ONE_STEP: bool = true;
    #[inline(always)]
    fn count(&self) -> u32 {
        1
    }
    #[inline(always)]
    fn epoch(&self) -> u32 {
        self.epoch
    }
    #[inline(always)]
    fn maps(&self, _: u32) -> (u64, u64) {
        (self.p.k_map, self.p.v_map)
    }
    #[inline(always)]
    fn k_pos(&self, _: u32) -> SeqPos {
        self.p.k_pos
    }
    #[inline(always)]
    unsafe fn wait_ready(&self, _: u32, _: &Bound<'_>) -> WaitResult {
        Ok(())
    }
    #[inline(always)]
    unsafe fn before_merge(&self, _: u32, _: u32, _: &Bound<'_>) -> WaitResult {
        Ok(())
    }
    #[inline(always)]
    unsafe fn after_store(&self, _: u32, _: u32) {}
    #[inline(always)]
    unsafe fn part_done(&self, _: u32, _: u32) {}
}

/// What a producer thread loads.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Loads {
    /// Claims the units of work from the ticket counter and loads their Q and K blocks.
    QK,
    /// Follows those units through the Q ring and loads their V blocks: a K load then never
    /// waits behind a V slot, which frees only once its product is done.
    V,
}

/// The launch's units of work: every tile of every step.
#[inline(always)]
fn units_of<S: KvSteps>(g: &Geometry, steps: &S) -> Units {
    Units::new(g.tiles(), steps.count(), steps.split(g.tiles()))
}

/// What unit `u` covers (one step of one tile, at compile time for plain attention).
#[inline(always)]
fn span_of<S: KvSteps>(units: &Units, u: u32) -> Span {
    if S::ONE_STEP {
        Span { tile: u, first: 0, end: 1 }
    } else {
        units.span(u)
    }
}

/// Draw this CTA's next ticket from the launch's counter: a unit, or [`Units::END`] past the
/// last (each of the `ctas` claiming CTAs draws exactly one such ticket per launch).
///
/// # Safety
/// `p.sched` is the launch's ticket counter.
#[inline(always)]
unsafe fn claim<S: KvSteps>(p: &AttnParams, units: Units, steps: &S, ctas: u32) -> u32 {
    units.of_ticket(atom_add_relaxed_gpu_u32((p.sched + 8) as *mut u32, 1), steps.epoch(), ctas)
}

/// A producer thread: until no unit of work is left, for each unit, Q and each visible K block
/// ([`Loads::QK`], which claims the units) or each visible V block ([`Loads::V`]).
///
/// # Safety
/// Thread 0 (`QK`) and thread 32 (`V`) of a CTA launched as [`run_cta`] says; the maps are valid.
#[inline(always)]
unsafe fn produce<const D: u32, S: KvSteps>(
    p: &AttnParams,
    g0: &Geometry,
    (steps, ctas): (&S, u32),
    smem: &Smem<D>,
    b: &Bound<'_>,
    loads: Loads,
) {
    let (kp, vp, qp) = (smem.k_pipe(), smem.v_pipe(), smem.q_pipe());
    let (mut kst, mut vst, mut qst) = (PipeState::start(), PipeState::start(), PipeState::start());
    let units = units_of(g0, steps);
    let mut ready = 0; // steps whose K/V may be read
    if loads == Loads::QK {
        prefetch_tensormap(p.q_map);
    }
    loop {
        let u = if loads == Loads::QK {
            let u = claim(p, units, steps, ctas);
            if qp.acquire(qst, b, u).is_err() {
                stop(b.diag);
            }
            st_shared_u32(smem.unit(qst.slot), u);
            if u == Units::END {
                // No tile: a plain arrival completes the phase; the others read END and stop.
                mbarrier_arrive(qp.full(qst.slot));
                return;
            }
            u
        } else {
            // The stage is not reused before this thread read its word: it is one of the stage's
            // releases ([`q_releases`]).
            if qp.wait(qst, b, 0).is_err() {
                stop(b.diag);
            }
            let u = ld_shared_u32(smem.unit(qst.slot));
            if u == Units::END {
                return;
            }
            qp.release(qst.slot);
            u
        };
        let sp = span_of::<S>(&units, u);
        let w = g0.work(sp.tile);
        if loads == Loads::QK {
            if !S::ONE_STEP && sp.first > 0 {
                for c in 0..consumers(D) {
                    if steps.before_merge(sp.first, sp.tile * consumers(D) + c, b).is_err() {
                        stop(b.diag);
                    }
                }
            }
            qp.expect(qst, q_bytes(D));
            let origin = (w.h, w.mb * block_m(D), w.b);
            load_tile::<D>(g0, (smem.q(qst.slot), block_m(D)), p.q_map, qp.full(qst.slot), origin);
        }
        qst.advance();
        let hk = g0.kv_head(w.h);
        let (pipe, st) = if loads == Loads::QK { (kp, &mut kst) } else { (vp, &mut vst) };
        for step in sp.first..sp.end {
            while ready <= step {
                // A step whose K/V never came already reported; loading anyway lets the CTA
                // finish.
                let _ = steps.wait_ready(ready, b);
                ready += 1;
            }
            let (k_map, v_map) = steps.maps(step);
            let map = if loads == Loads::QK { k_map } else { v_map };
            let g = g0.with_keys(steps.k_pos(step));
            for j in 0..g.kv_blocks(w.mb) {
                if pipe.acquire(*st, b, u).is_err() {
                    stop(b.diag);
                }
                pipe.expect(*st, kv_bytes(D));
                let dst = if loads == Loads::QK { smem.k(st.slot) } else { smem.v(st.slot) };
                load_tile::<D>(&g, (dst, BLOCK_N), map, pipe.full(st.slot), (hk, j * BLOCK_N, w.b));
                st.advance();
            }
        }
    }
}

/// `s = Q[cwg's rows] K^T` over `D / 16` k-slices (the first overwrites `s`).
///
/// # Safety
/// All 128 threads of the warpgroup, after `wgmma::fence`; Q and the K block are loaded.
#[inline(always)]
unsafe fn qk<const D: u32>(s: &mut [f32; 64], q: u32, k: u32) {
    let (q, k) = (opaque_u32(q), opaque_u32(k));
    for ks in 0..D / 16 {
        let box_ = ks / 4;
        let step = (ks % 4) * K16_STEP_K_MAJOR;
        let da = SmemDesc::k_major(q + box_ * block_m(D) * SW128_ROW_BYTES).advance(step).0;
        let db = SmemDesc::k_major(k + box_ * BLOCK_N * SW128_ROW_BYTES).advance(step).0;
        wgmma::mma_m64n128k16_bf16::<0>(s, da, db, (ks > 0) as u32);
    }
}

/// `o (+)= P V` over the block's 128 keys: `p` holds P as eight k-slices of wgmma A fragments;
/// V's `D / 64` boxes are read N-major (rows are keys).
///
/// # Safety
/// All 128 threads of the warpgroup, after `wgmma::fence`; the V block is loaded.
#[inline(always)]
// `unroll16!` writes out k = 0..16; the `$kk < BLOCK_N / 16` branch drops the steps past the
// block at compile time, but clippy still sees their constant indices.
#[allow(clippy::out_of_bounds_indexing)]
unsafe fn pv<const D: u32>(o: &mut [f32; 64], p: &[u32; 32], v: u32, accumulate: bool) {
    let desc = SmemDesc::mn_major(opaque_u32(v), BLOCK_N * SW128_ROW_BYTES);
    macro_rules! slice {
        ($kk:expr) => {
            if $kk < BLOCK_N / 16 {
                let db = desc.advance($kk * K16_STEP_MN_MAJOR).0;
                let a = [p[4 * $kk], p[4 * $kk + 1], p[4 * $kk + 2], p[4 * $kk + 3]];
                let scale_d = (accumulate || $kk > 0) as u32;
                if D == 128 {
                    wgmma::mma_m64n128k16_bf16_rs::<1>(o, &a, db, scale_d);
                } else {
                    // SAFETY: the first 32 accumulators of `o` as an array (D = 64 uses only them).
                    let o64 = &mut *(o.as_mut_ptr() as *mut [f32; 32]);
                    wgmma::mma_m64n64k16_bf16_rs::<1>(o64, &a, db, scale_d);
                }
            }
        };
    }
    unroll16!(slice);
}

/// Max of `x` over the 4 threads of a quad (the threads sharing a row).
#[inline(always)]
fn quad_max(x: f32) -> f32 {
    let x = x.max(f32::from_bits(shfl_xor(x.to_bits(), 1)));
    x.max(f32::from_bits(shfl_xor(x.to_bits(), 2)))
}

/// Sum of `x` over the 4 threads of a quad.
#[inline(always)]
fn quad_sum(x: f32) -> f32 {
    let x = x + f32::from_bits(shfl_xor(x.to_bits(), 1));
    x + f32::from_bits(shfl_xor(x.to_bits(), 2))
}

/// One query row pair's running softmax state: the running max of the raw scores (`-inf` before
/// any visible key) and this thread's share of the running sum of `2^(scale_log2 (s - max))`.
#[derive(Clone, Copy)]
pub struct RowStats {
    /// Running max per row half (rows `r`, `r + 8`).
    pub max: [f32; 2],
    /// This thread's partial sums per row half (the quad's sum is the row's).
    pub sum: [f32; 2],
}

impl RowStats {
    /// Before the first block.
    #[inline(always)]
    pub const fn new() -> Self {
        Self { max: [f32::NEG_INFINITY; 2], sum: [0.0; 2] }
    }

    /// Fold a block of scores `s` into the running state: `s` becomes the probabilities
    /// `2^(scale_log2 s - scaled max)`; returns, per row half, the factor by which everything
    /// accumulated before this block must shrink (the old max's weight under the new one).
    #[inline(always)]
    pub fn softmax(&mut self, s: &mut [f32; 64], scale_log2: f32) -> [f32; 2] {
        [self.softmax_half::<0>(s, scale_log2), self.softmax_half::<1>(s, scale_log2)]
    }

    /// [`RowStats::softmax`] for row half `H` (rows `r + 8 H`).
    #[inline(always)]
    fn softmax_half<const H: usize>(&mut self, s: &mut [f32; 64], scale_log2: f32) -> f32 {
        // Tree reductions: four independent chains instead of one 32-deep chain of dependent
        // max (and below, add) instructions.
        let mut m4 = [f32::NEG_INFINITY; 4];
        macro_rules! mx {
            ($j:expr) => {
                m4[$j % 4] = m4[$j % 4].max(s[4 * $j + 2 * H]).max(s[4 * $j + 2 * H + 1]);
            };
        }
        unroll16!(mx);
        let mx = m4[0].max(m4[1]).max(m4[2].max(m4[3]));
        let new_max = self.max[H].max(quad_max(mx));
        // A row with nothing visible yet keeps max -inf; subtracting 0 then keeps its
        // probabilities at 2^-inf = 0 instead of NaN.
        let scaled = if new_max == f32::NEG_INFINITY { 0.0 } else { new_max * scale_log2 };
        let alpha = ex2_approx(fma(self.max[H], scale_log2, -scaled));
        self.max[H] = new_max;
        let mut sum4 = [0f32; 4];
        macro_rules! ex {
            ($j:expr) => {
                // One FFMA each: written as `s * scale - scaled`, Rust keeps a separate multiply
                // and subtract (it never contracts), a quarter of the softmax's FP32 work.
                let x0 = ex2_approx(fma(s[4 * $j + 2 * H], scale_log2, -scaled));
                let x1 = ex2_approx(fma(s[4 * $j + 2 * H + 1], scale_log2, -scaled));
                s[4 * $j + 2 * H] = x0;
                s[4 * $j + 2 * H + 1] = x1;
                sum4[$j % 4] += x0 + x1;
            };
        }
        unroll16!(ex);
        let sum = (sum4[0] + sum4[1]) + (sum4[2] + sum4[3]);
        self.sum[H] = self.sum[H] * alpha + sum;
        alpha
    }
}

/// Shrink the first `d` columns of the output accumulators by `alpha` (per row half).
#[inline(always)]
fn rescale(o: &mut [f32; 64], alpha: [f32; 2], d: u32) {
    macro_rules! r {
        ($j:expr) => {
            if $j < d / 8 {
                o[4 * $j] *= alpha[0];
                o[4 * $j + 1] *= alpha[0];
                o[4 * $j + 2] *= alpha[1];
                o[4 * $j + 3] *= alpha[1];
            }
        };
    }
    unroll16!(r);
}

/// Round the probabilities to bf16 pairs: the A fragments of `P V` (see `arch::wgmma`).
#[inline(always)]
fn pack(s: &[f32; 64], p: &mut [u32; 32]) {
    macro_rules! pk {
        ($j:expr) => {
            p[2 * $j] = pack_bf16x2(s[4 * $j], s[4 * $j + 1]);
            p[2 * $j + 1] = pack_bf16x2(s[4 * $j + 2], s[4 * $j + 3]);
        };
    }
    unroll16!(pk);
}

impl Default for RowStats {
    fn default() -> Self {
        Self::new()
    }
}

/// Set the scores of keys a row does not see to `-inf`: the thread's first row sees keys
/// `0 .. lim[0]`, its second (8 rows on) `0 .. lim[1]` ([`Geometry::visible_keys`]); `col0` is
/// its first column. One compare per score, against two limits worked out once per tile.
#[inline(always)]
fn mask(s: &mut [f32; 64], lim: [u32; 2], col0: u32) {
    macro_rules! m {
        ($j:expr) => {
            let c = col0 + 8 * $j;
            if c >= lim[0] {
                s[4 * $j] = f32::NEG_INFINITY;
            }
            if c + 1 >= lim[0] {
                s[4 * $j + 1] = f32::NEG_INFINITY;
            }
            if c >= lim[1] {
                s[4 * $j + 2] = f32::NEG_INFINITY;
            }
            if c + 1 >= lim[1] {
                s[4 * $j + 3] = f32::NEG_INFINITY;
            }
        };
    }
    unroll16!(m);
}

/// A consumer warpgroup: for each unit the producer hands over, the online-softmax mainloop over
/// the visible key blocks, then O (normalised, bf16) through shared memory and TMA, and the
/// log-sum-exp (or, at a ring's earlier steps, the merge into the running output).
///
/// # Safety
/// All 128 threads of consumer warpgroup `cwg` of a CTA launched as [`run_cta`] says.
#[inline(always)]
unsafe fn consume<const D: u32, S: KvSteps>(
    p: &AttnParams,
    g0: &Geometry,
    steps: &S,
    smem: &Smem<D>,
    b: &Bound<'_>,
    cwg: u32,
    t: u32,
) {
    let (kp, vp, qp) = (smem.k_pipe(), smem.v_pipe(), smem.q_pipe());
    let (mut kst, mut vst, mut qst) = (PipeState::start(), PipeState::start(), PipeState::start());
    let lane = t % 32;
    let rows = cwg * 64 + 16 * (t / 32) + lane / 4;
    let count = steps.count();
    let tiles = g0.tiles();
    let units = units_of(g0, steps);
    loop {
        if qp.wait(qst, b, 0).is_err() {
            stop(b.diag);
        }
        let u = ld_shared_u32(smem.unit(qst.slot));
        let q_rows = smem.q(qst.slot) + cwg * 64 * SW128_ROW_BYTES;
        if u == Units::END {
            break;
        }
        let sp = span_of::<S>(&units, u);
        let i = sp.tile;
        let w = g0.work(i);
        let row = w.mb * block_m(D) + rows;
        let mut o = [0f32; 64];
        let mut stats = RowStats::new();
        let mut pfrag = [0u32; 32];
        // Whether a block's P waits for its product with V. Every product accumulates into O
        // (zero before the first).
        let mut any = false;
        // Block j's S = Q K_j^T is issued together with block j-1's O += P V, and block j's
        // softmax runs while that product is in flight (FlashAttention-3's intra-warpgroup
        // pipelining); O is rescaled and P repacked only once the product reading them is done.
        // A unit over several steps runs their blocks as one sequence: the online softmax does
        // not care where a key came from.
        for step in sp.first..sp.end {
            let g = g0.with_keys(steps.k_pos(step));
            let blocks = g.kv_blocks(w.mb);
            // Per step, so that the loop keeps three words rather than the geometry they came from.
            let (lim, masked_from) = ([g.visible_keys(row), g.visible_keys(row + 8)], g.first_masked_block(w.mb));
            // One block: `$pv` says whether the block before's product rides along (not for the
            // unit's first block). That block is peeled off so that no branch sits between
            // in-flight wgmmas.
            macro_rules! block {
                ($j:expr, $pv:expr) => {{
                    let j = $j;
                    let mut s = [0f32; 64];
                    // Both waits come before the first wgmma: a (divergent) wait loop between
                    // two in-flight wgmmas would make ptxas serialise them.
                    if kp.wait(kst, b, i).is_err() || ($pv && vp.wait(vst, b, i).is_err()) {
                        stop(b.diag);
                    }
                    wgmma::fence();
                    qk::<D>(&mut s, q_rows, smem.k(kst.slot));
                    wgmma::commit_group();
                    if $pv {
                        pv::<D>(&mut o, &pfrag, smem.v(vst.slot), true);
                        wgmma::commit_group();
                        wgmma::wait_group::<1>();
                    } else {
                        wgmma::wait_group::<0>();
                    }
                    if lane == 0 {
                        kp.release(kst.slot);
                    }
                    kst.advance();
                    if j >= masked_from {
                        mask(&mut s, lim, j * BLOCK_N + 2 * (t % 4));
                    }
                    let alpha = stats.softmax(&mut s, p.scale_log2);
                    if $pv {
                        wgmma::wait_group::<0>();
                        if lane == 0 {
                            vp.release(vst.slot);
                        }
                        vst.advance();
                        rescale(&mut o, alpha, D);
                    }
                    pack(&s, &mut pfrag);
                }};
            }
            // Each loop starts at a constant: with one loop from a block index that depends
            // on `any`, ptxas built the wgmma descriptors outside the uniform datapath (4-8%
            // slower on H200).
            if !any {
                if blocks > 0 {
                    block!(0, false);
                    any = true;
                }
                for j in 1..blocks {
                    block!(j, true);
                }
            } else {
                for j in 0..blocks {
                    block!(j, true);
                }
            }
        }
        if any {
            if vp.wait(vst, b, i).is_err() {
                stop(b.diag);
            }
            wgmma::fence();
            pv::<D>(&mut o, &pfrag, smem.v(vst.slot), true);
            wgmma::commit_group();
            wgmma::wait_group::<0>();
            if lane == 0 {
                vp.release(vst.slot);
            }
            vst.advance();
        }
        // This warpgroup's rows of the tile: the ring's flags and counters count such parts.
        let part = i * consumers(D) + cwg;
        if t == 0 {
            for step in sp.first..sp.end {
                steps.part_done(step, consumers(D) * tiles);
            }
        }
        // The running output of the step before is ready: the producer waited for it before it
        // loaded Q ([`KvSteps::before_merge`]).
        let (first, last) = (S::ONE_STEP || sp.first == 0, S::ONE_STEP || sp.end == count);
        let unchanged = !S::ONE_STEP && !any && !first && !last;
        if unchanged {
            // No key of these steps is visible to the tile (a causal ring's later chunks): their
            // weight in the merge is zero, so the running output stays as it is, unread and
            // unwritten. Its flag still moves on, after the step before's (acquired through Q).
            smem.q_pipe().release(qst.slot);
        } else {
            finish_tile::<D>(p, g0, smem, qst.slot, &o, &stats, w, (first, last), (cwg, t, row));
        }
        if !last {
            if !unchanged {
                named_barrier_sync(1 + cwg, 128); // every thread wrote its part
            }
            if t == 0 {
                steps.after_store(sp.end - 1, part);
            }
        }
        qst.advance();
    }
    if t == 0 {
        bulk_wait_group::<0>();
    }
}

/// Normalise O and finish the tile: with one step (or at a ring's last), stage O (bf16) in the
/// warpgroup's rows of the Q tile, TMA-store it and write the log-sum-exp; at a ring's other
/// steps, fold the tile into the running f32 output and log-sum-exp (`o_acc`, `lse_acc`): the
/// same threads touch the same elements at every step, so no synchronisation is needed. The Q
/// tile is released once nothing reads it any more.
///
/// # Safety
/// As [`consume`]; this warpgroup's wgmmas reading Q have completed.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn finish_tile<const D: u32>(
    p: &AttnParams,
    g: &Geometry,
    smem: &Smem<D>,
    q_slot: u32,
    o: &[f32; 64],
    stats: &RowStats,
    w: Work,
    (first, last): (bool, bool),
    (cwg, t, row): (u32, u32, u32),
) {
    let lane = t % 32;
    // A row that saw no key (a fully masked causal row) outputs zeros and lse = -inf.
    let finish = |max: f32, partial: f32| {
        let l = quad_sum(partial);
        if l > 0.0 {
            (rcp_approx(l), (max * p.scale_log2 + lg2_approx(l)) * core::f32::consts::LN_2)
        } else {
            (0.0, f32::NEG_INFINITY)
        }
    };
    let (mut w0, mut lse0) = finish(stats.max[0], stats.sum[0]);
    let (mut w1, mut lse1) = finish(stats.max[1], stats.sum[1]);
    let pair_row = ((w.b * g.heads() + w.h) as usize) * g.seq_q() as usize;
    let (live0, live1) = (row < g.seq_q(), row + 8 < g.seq_q());
    // Several steps: out = w * o + wp * previous, with lse the log-sum-exp of both.
    let (mut wp0, mut wp1) = (0f32, 0f32);
    let acc = (p.o_acc as *mut [f32; 2]).add((pair_row + row as usize) * D as usize / 2);
    // This thread's elements of the previous running output (rows `row` and `row + 8` of
    // columns `8j + 2 (t % 4)`, two per j; zero for rows past seq_q) and their log-sum-exp, all
    // loads issued before any is used: one at a time (volatile accesses), each a round trip to
    // L2, they held the warpgroup for the whole merge. Another CTA may have written them; the
    // producer acquired its flag before Q's arrival, which this thread acquired (`before_merge`).
    let mut prev = [[0f32; 2]; 32];
    if !first {
        let lse_acc = (p.lse_acc as *const f32).add(pair_row + row as usize);
        let prev0 = if live0 { ld_relaxed_gpu_f32(lse_acc) } else { f32::NEG_INFINITY };
        let prev1 = if live1 { ld_relaxed_gpu_f32(lse_acc.add(8)) } else { f32::NEG_INFINITY };
        macro_rules! fetch {
            ($j:expr) => {
                if $j < D / 8 {
                    let col = (8 * $j + 2 * (t % 4)) as usize;
                    if live0 {
                        prev[2 * $j] = ld_relaxed_gpu_v2_f32(acc.add(col / 2));
                    }
                    if live1 {
                        prev[2 * $j + 1] = ld_relaxed_gpu_v2_f32(acc.add(4 * D as usize + col / 2));
                    }
                }
            };
        }
        unroll16!(fetch);
        let merge = |lse: f32, prev: f32| -> (f32, f32, f32) {
            let m = lse.max(prev);
            if m == f32::NEG_INFINITY {
                return (0.0, 0.0, m);
            }
            let (a, c) =
                (ex2_approx((lse - m) * core::f32::consts::LOG2_E), ex2_approx((prev - m) * core::f32::consts::LOG2_E));
            let inv = rcp_approx(a + c);
            (a * inv, c * inv, m + lg2_approx(a + c) * core::f32::consts::LN_2)
        };
        let (a0, c0, n0) = merge(lse0, prev0);
        let (a1, c1, n1) = merge(lse1, prev1);
        (w0, wp0, lse0) = (w0 * a0, c0, n0);
        (w1, wp1, lse1) = (w1 * a1, c1, n1);
    }
    if !last {
        macro_rules! keep {
            ($j:expr) => {
                if $j < D / 8 {
                    let col = 8 * $j + 2 * (t % 4);
                    if live0 {
                        let q = prev[2 * $j];
                        *acc.add(col as usize / 2) = [o[4 * $j] * w0 + q[0] * wp0, o[4 * $j + 1] * w0 + q[1] * wp0];
                    }
                    if live1 {
                        let q = prev[2 * $j + 1];
                        *acc.add(4 * D as usize + col as usize / 2) =
                            [o[4 * $j + 2] * w1 + q[0] * wp1, o[4 * $j + 3] * w1 + q[1] * wp1];
                    }
                }
            };
        }
        unroll16!(keep);
        if t % 4 == 0 {
            let lse = (p.lse_acc as *mut f32).add(pair_row + row as usize);
            if live0 {
                *lse = lse0;
            }
            if live1 {
                *lse.add(8) = lse1;
            }
        }
        smem.q_pipe().release(q_slot);
        return;
    }
    let r = 16 * (t / 32) + lane / 4;
    let q_rows = smem.q(q_slot) + cwg * 64 * SW128_ROW_BYTES;
    macro_rules! put {
        ($j:expr) => {
            if $j < D / 8 {
                let col = 8 * $j + 2 * (t % 4);
                let chunk = q_rows + (col / 64) * block_m(D) * SW128_ROW_BYTES;
                let byte = (col % 64) * 2;
                // Rows past seq_q have no running output (and are never stored): zeros.
                let (q0, q1) = (prev[2 * $j], prev[2 * $j + 1]);
                let (x0, x1) = (o[4 * $j] * w0 + q0[0] * wp0, o[4 * $j + 1] * w0 + q0[1] * wp0);
                let (y0, y1) = (o[4 * $j + 2] * w1 + q1[0] * wp1, o[4 * $j + 3] * w1 + q1[1] * wp1);
                st_shared_u32(chunk + swizzle128(r, byte), pack_bf16x2(x0, x1));
                st_shared_u32(chunk + swizzle128(r + 8, byte), pack_bf16x2(y0, y1));
            }
        };
    }
    unroll16!(put);
    if p.lse != 0 && t % 4 == 0 {
        let lse = (p.lse as *mut f32).add(pair_row);
        if live0 {
            *lse.add(row as usize) = lse0;
        }
        if live1 {
            *lse.add(row as usize + 8) = lse1;
        }
    }
    fence_proxy_async_shared();
    named_barrier_sync(1 + cwg, 128);
    if t == 0 {
        let row0 = w.mb * block_m(D) + cwg * 64;
        if row0 < g.seq_q() {
            for c in 0..D / 64 {
                tma_store_4d(p.o_map, q_rows + c * block_m(D) * SW128_ROW_BYTES, g.coords(64 * c, w.h, row0, w.b));
            }
        }
        bulk_commit_group();
        bulk_wait_group_read::<0>();
    }
    named_barrier_sync(1 + cwg, 128); // the stores have read the staged rows
    smem.q_pipe().release(q_slot);
}

/// A CTA counted in `ctas` that cannot run attention after all (its shared memory may still
/// receive a stray copy): draw tickets until one past the end, so the counter's per-launch count
/// stays whole for the next launch. The units it drew stay undone: a later step's merge waiting
/// on one times out and reports who waited for what; a unit nothing waits on (a whole tile, a
/// last step) leaves its rows unwritten. It happens only after a copy already failed and
/// reported, so the launch is an error either way.
///
/// # Safety
/// One thread of such a CTA, once per launch; `p` as for [`run_cta`].
#[inline(always)]
pub unsafe fn forfeit<const D: u32, S: KvSteps>(p: &AttnParams, steps: &S, ctas: u32) {
    let units = units_of(&Geometry::new(p, D), steps);
    while claim(p, units, steps, ctas) != Units::END {}
}

/// Run one attention CTA, one of `ctas` claiming units of work (every thread calls it): thread 0
/// claims units and loads Q and K, thread 32 loads V, warpgroups `1 ..= consumers(D)` consume.
///
/// # Safety
/// Launched with [`threads`]`(D)` threads and [`smem_bytes`]`(D)` of dynamic shared memory;
/// `D` is 64 or 128; the parameters describe valid tensors (the host checked them).
#[inline(always)]
pub unsafe fn run_cta<const D: u32, S: KvSteps>(p: &AttnParams, steps: &S, ctas: u32, b: Bound<'_>) {
    let smem = Smem::<D> { base: dyn_smem_base() };
    let tid = thread_idx_x();
    if tid == 0 {
        smem.init();
    }
    sync_threads();
    let g = Geometry::new(p, D);
    // Registers: the producer gives up what the consumers take, within 64 Ki per CTA (two
    // consumers: 128 x 40 + 256 x 232; three: 128 x 24 + 384 x 160).
    let three = consumers(D) == 3;
    if tid / 128 == 0 {
        if three {
            setmaxnreg_dec::<24>();
        } else {
            setmaxnreg_dec::<40>();
        }
        if tid == 0 {
            produce::<D, S>(p, &g, (steps, ctas), &smem, &b, Loads::QK);
        } else if tid == 32 {
            produce::<D, S>(p, &g, (steps, ctas), &smem, &b, Loads::V);
        }
    } else {
        if three {
            setmaxnreg_inc::<160>();
        } else {
            setmaxnreg_inc::<232>();
        }
        consume::<D, S>(p, &g, steps, &smem, &b, tid / 128 - 1, tid % 128);
    }
}
