//! The persistent Hopper GEMM: `C[m, n] = A[m, k] @ B`, bf16 inputs, f32 accumulation, bf16 or
//! f32 output. A is `[m, k]` row-major; B is `[k, n]` ([`BLayout::KN`]) or `[n, k]` row-major
//! ([`BLayout::NK`], a torch `Linear` weight); C is `[m, n]` row-major.
//!
//! ```no_run
//! # fn main() -> Result<(), mkernel::Error> {
//! use mkernel::gemm::{BLayout, Gemm, GemmShape, Output};
//! use half::bf16;
//! let gpu = mkernel::Gpu::new(0)?;
//! let shape = GemmShape { m: 4096, n: 4096, k: 4096 };
//! let a = gpu.upload(&vec![bf16::ONE; 4096 * 4096])?;
//! let b = gpu.upload(&vec![bf16::ONE; 4096 * 4096])?;
//! let c = gpu.alloc::<bf16>(4096 * 4096)?;
//! let gemm = Gemm::new(&gpu, shape, BLayout::NK, &a, &b, Output::Bf16(&c), Default::default())?;
//! gemm.run(&gpu)?; // launch, wait, report any device-side timeout
//! # Ok(()) }
//! ```
use crate::abi::{GatherGemmParams, GemmParams, RoleSplit, SplitKParams, B_KN, B_NK};
use crate::error::{invalid, need_len, DiagBuffers, Error, Result};
use crate::gpu::{
    kernels, DeviceBuffer, DeviceSlice, Gpu, L2Promotion, LaunchConfig, Swizzle, TensorMap, Tile2d, TmaDtype,
};
use crate::sched::{KSplit, StreamK, TileGrid};
use half::bf16;
use mkernel_device::kernels_info::gemm as k;
use std::marker::PhantomData;
use std::time::Duration;

pub use mkernel_device::kernels_info::gemm::{
    a_box_rows, deep_smem_bytes, split_half_bytes, stage_tx_bytes, DEEP_SMEM_BYTES, SMEM_BYTES, THREADS, TILE_K,
    TILE_M, TILE_N, TILE_WIDTHS,
};

/// Layout of B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// `[k, n]` row-major.
    KN,
    /// `[n, k]` row-major (the layout of a torch `Linear` weight).
    NK,
}

impl BLayout {
    /// `kn` for [`BLayout::KN`], `nk` for [`BLayout::NK`]: a kernel, a code or a size per layout.
    pub fn pick<T>(self, kn: T, nk: T) -> T {
        match self {
            BLayout::KN => kn,
            BLayout::NK => nk,
        }
    }
}

/// Problem size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GemmShape {
    /// Rows of A and C.
    pub m: usize,
    /// Columns of B and C (a multiple of 8).
    pub n: usize,
    /// The reduction dimension: columns of A, rows of B (a multiple of 8).
    pub k: usize,
}

impl GemmShape {
    /// Elements of A, B and C together (`None` when the count overflows): what a run of this
    /// shape allocates, for [`crate::Gpu::check_fits`] before any host data is made.
    pub fn operand_elements(&self) -> Option<usize> {
        let (m, n, k) = (self.m, self.n, self.k);
        m.checked_mul(k)?.checked_add(k.checked_mul(n)?)?.checked_add(m.checked_mul(n)?)
    }

    /// Floating-point operations of one product.
    pub fn flops(&self) -> f64 {
        2.0 * self.m as f64 * self.n as f64 * self.k as f64
    }

    /// Check the shape and buffer sizes against the kernel's rules, naming the one broken.
    pub fn validate(&self, a_len: usize, b_len: usize, c_len: usize) -> Result<()> {
        for (arg, v) in [("m", self.m), ("n", self.n), ("k", self.k)] {
            if v == 0 {
                return Err(invalid(arg, "must be at least 1"));
            }
            if v > i32::MAX as usize {
                return Err(invalid(arg, format!("{v} exceeds 2^31 - 1 (TMA coordinates are 32-bit)")));
            }
        }
        if !self.k.is_multiple_of(8) {
            return Err(invalid("k", format!("{} is not a multiple of 8: TMA needs 16-byte row strides, and rows of A (and of B for NK) are k bf16", self.k)));
        }
        if !self.n.is_multiple_of(8) {
            return Err(invalid("n", format!("{} is not a multiple of 8: TMA needs 16-byte row strides, and rows of C (and of B for KN) are n elements", self.n)));
        }
        need_len("a", a_len, self.m * self.k)?;
        need_len("b", b_len, self.k * self.n)?;
        need_len("c", c_len, self.m * self.n)
    }
}

/// Where the product goes.
#[derive(Clone, Copy)]
pub enum Output<'a> {
    /// Rounded to bf16 (the accumulators are f32).
    Bf16(&'a DeviceBuffer<bf16>),
    /// The f32 accumulators as they are.
    F32(&'a DeviceBuffer<f32>),
}

impl Output<'_> {
    pub(crate) fn len(&self) -> usize {
        match self {
            Output::Bf16(b) => b.len(),
            Output::F32(b) => b.len(),
        }
    }
    pub(crate) fn addr(&self) -> u64 {
        match self {
            Output::Bf16(b) => b.addr(),
            Output::F32(b) => b.addr(),
        }
    }
}

/// Tuning knobs.
#[derive(Clone, Copy, Debug)]
pub struct GemmOptions {
    /// Persistent CTAs (default: one per SM).
    pub ctas: Option<u32>,
    /// Tile rows walked together in the grouped raster order (L2 reuse).
    pub group_m: u32,
    /// Units each output tile's k-blocks are cut into (split-K): 1 is the plain GEMM; at most
    /// `ceil(k / TILE_K)`. None: [`default_split_k`].
    pub split_k: Option<u32>,
    /// Stream-K ([`crate::sched::StreamK`]): every CTA takes an equal, contiguous run of the
    /// tiles' k-blocks (256-column tiles, at most one tile per CTA, no split). Off unless asked
    /// for: no shape measured faster with it on H200 (docs/PERF.md: its partial sums cost more
    /// than the SMs it fills; narrower tiles fill them for free).
    pub stream_k: bool,
    /// The deep shared-memory ring (as many stages as fit, stores straight from registers)
    /// rather than the staged one (`STAGES`, bf16 through staging tiles and TMA stores).
    /// Split-K, stream-K and tiles narrower than [`TILE_N`] always run deep. None:
    /// [`default_deep_ring`].
    pub deep_ring: Option<bool>,
    /// Output tile width in columns, one of [`TILE_WIDTHS`] (64, 128, 192, 224, 256); tiles other
    /// than [`TILE_N`] wide run the deep ring, and stream-K takes only [`TILE_N`]. None:
    /// [`default_tile_n`].
    pub tile_n: Option<u32>,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for GemmOptions {
    fn default() -> Self {
        Self {
            ctas: None,
            group_m: 8,
            split_k: None,
            stream_k: false,
            deep_ring: None,
            tile_n: None,
            timeout: Duration::from_secs(10),
        }
    }
}

impl GemmOptions {
    /// These options with every tile computed whole by one CTA (no split-K, no stream-K) in
    /// the fused kernels' [`TILE_N`]-wide tiles: what a fused op's unfused reference needs to
    /// sum in the fused kernel's order.
    pub fn whole_tiles(self) -> Self {
        Self { split_k: Some(1), stream_k: false, tile_n: Some(TILE_N), ..self }
    }
}

/// Fewest k-blocks a split-K unit gets from [`default_split_k`]: below this the fixup (every
/// unit writes and the last reads an f32 partial of the tile) outweighs the loads it spreads.
pub const MIN_SPLIT_K_BLOCKS: u32 = 4;

/// The tile width the GEMM takes unless told otherwise, for B in `layout`.
///
/// Compute-bound shapes (more than [`DEEP_RING_MAX_M`] rows) are timed by their busiest SM's
/// tensor-core work, its waves of tiles times their width ([`mma_cost`]): [`TILE_N`], unless one
/// of the [`WAVE_WIDTHS`] does more than [`NARROW_WAVE_GAIN`] less. That is where a tile row of
/// 256 columns leaves a last wave mostly idle: N = 28672 makes 112 tiles a row in 256 columns,
/// 128 in 224, so 512 rows take 4 waves of either; three tile rows of N = 8192 make 96 tiles of
/// 256 and 129 of 192, one wave of either.
///
/// The others are bound by streaming B into the SMs or by memory, so each width, with the split
/// [`default_split_k`] gives it, is timed by [`stream_estimate`] (the busiest SM's loads and
/// tensor-core work, memory's floor, the split-K fixup), ties broken by the bytes all SMs load,
/// then the wider. At N = 8192 that is 64 columns for M <= 128 (128 tiles, no split, where 256
/// columns needed 4 splits) and 128 at M = 256; at N = 28672, 256 columns up to 128 rows
/// (memory bounds every width, and 256 load the fewest bytes) and 224 at 256 rows (two waves
/// of 224 columns, where 256 leave 40 SMs idle in the second).
pub fn default_tile_n(shape: GemmShape, layout: BLayout, ctas: u32) -> u32 {
    if shape.m > DEEP_RING_MAX_M {
        let work = |w: u32| mma_cost(shape, w, 1, ctas);
        let best = WAVE_WIDTHS.iter().copied().rev().min_by_key(|&w| work(w)).unwrap_or(TILE_N);
        return if work(best) as f64 <= work(TILE_N) as f64 * (1.0 - NARROW_WAVE_GAIN) { best } else { TILE_N };
    }
    let cost = |w: u32| stream_estimate(shape, layout, w, default_split_k(shape, ctas, w), ctas);
    TILE_WIDTHS.iter().copied().rev().min_by_key(|&w| cost(w)).unwrap_or(TILE_N)
}

/// The widths a compute-bound shape may take instead of [`TILE_N`] (see [`default_tile_n`]):
/// those whose wgmma reads nearly as few shared-memory bytes per product as 256 columns (a
/// wgmma reads A's 64 rows whatever its N: per product, 3% more bytes at 224 columns, 7% at 192,
/// 20% at 128).
pub const WAVE_WIDTHS: [u32; 2] = [192, 224];

/// The least share of the busiest SM's tensor-core work a [`WAVE_WIDTHS`] tile must save for a
/// compute-bound shape to take it over [`TILE_N`]: it runs the deep ring, whose stores leave
/// from registers, not from staging tiles under the next tile's mainloop. Between the 12.5% and
/// 25% a whole wave saves (N = 28672 from 512 rows, N = 8192 at 320..768 rows) and the 1.6% a
/// large shape's last partial wave saves (4096 x 8192 in 224 columns, measured 0.88-0.99x of
/// 256 on H200, docs/PERF.md).
pub const NARROW_WAVE_GAIN: f64 = 0.05;

/// The busiest SM's tensor-core work for `shape` in `tile_n`-wide tiles cut into `splits`
/// units over `ctas` CTAs, in columns x k-blocks: its waves of units, each `ceil(k-blocks /
/// splits)` k-blocks of a 128-row tile `tile_n` wide. What sets the time of a shape the tensor
/// cores bound, where a wider tile whose last wave leaves SMs idle loses to a narrower one that
/// fills it.
pub fn mma_cost(shape: GemmShape, tile_n: u32, splits: u32, ctas: u32) -> u64 {
    let (tiles, k_blocks) = tiles_and_k_blocks(shape, tile_n);
    let splits = splits.max(1) as u64;
    (tiles * splits).div_ceil(ctas.max(1) as u64) * k_blocks.div_ceil(splits) * tile_n as u64
}

/// Weight of a split-K fixup byte against a streamed one in [`stream_estimate`]: the fixup
/// runs after the mainloops, on the last unit of each tile, with nothing to hide it. Fitted to
/// the H200 call of docs/PERF.md ("Narrow tiles"): every unit writes and the last reads the
/// tile's f32 partials, 512 bytes per column per split.
pub const FIXUP_WEIGHT: u64 = 10;

/// The rates [`stream_estimate`] times a plan by, fitted on H200 (docs/PERF.md, "Whole
/// waves"): what one SM's TMA unit takes in from L2 when every SM streams (256 x 8192 x 8192
/// in 128-column tiles: 4.2 MB per SM in 57 us), what memory gives all of them together (the
/// best single pass over a 470 MB B), and how long the tensor cores take per column of a
/// 128-row tile per k-block (256 x 28672 x 8192: two waves of 256 columns in 187 us).
pub mod rates {
    /// Bytes per nanosecond into one SM.
    pub const SM_STREAM_BYTES_PER_NS: f64 = 74.0;
    /// Bytes per nanosecond from memory, all SMs together.
    pub const HBM_BYTES_PER_NS: f64 = 4100.0;
    /// Nanoseconds of tensor-core work per tile column per k-block (128 x 64 x 1 products).
    pub const MMA_NS_PER_COLUMN_BLOCK: f64 = 2.85;
}

/// A plan as [`default_tile_n`] weighs it: estimated time first, then, between plans that
/// memory bounds alike, the bytes every SM together takes in from L2.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct StreamEstimate {
    /// Estimated nanoseconds: the slowest of the busiest SM's streaming, its tensor-core work
    /// and memory's reading of every operand once, then the split-K fixup.
    pub ns: u64,
    /// Bytes all units load through TMA: a width whose B boxes overlap its neighbours' (224
    /// columns of a `[K, N]` B load 256) or that loads A once more per extra tile reads more.
    pub l2_bytes: u64,
}

/// [`StreamEstimate`] of `shape` (B in `layout`) in `tile_n`-wide tiles cut into `splits` units
/// over `ctas` CTAs: the busiest SM has `ceil(units / ctas)` units of `ceil(k-blocks / splits)`
/// stages each (A's box and B's columns, see [`stage_tx_bytes`]), taken in at
/// [`rates::SM_STREAM_BYTES_PER_NS`] and multiplied at [`rates::MMA_NS_PER_COLUMN_BLOCK`]; no
/// plan beats memory reading A, B and C once at [`rates::HBM_BYTES_PER_NS`]; the split-K fixup
/// ([`FIXUP_WEIGHT`] times the partials' bytes at the SM rate) follows the mainloops. Where
/// memory bounds every width (N = 28672 up to 128 rows), their times tie and the bytes decide.
pub fn stream_estimate(shape: GemmShape, layout: BLayout, tile_n: u32, splits: u32, ctas: u32) -> StreamEstimate {
    use rates::*;
    let (tiles, k_blocks) = tiles_and_k_blocks(shape, tile_n);
    let units = tiles * splits.max(1) as u64;
    let waves = units.div_ceil(ctas.max(1) as u64);
    let unit_blocks = k_blocks.div_ceil(splits.max(1) as u64);
    let a_rows = a_box_rows(shape.m.min(u32::MAX as usize) as u32);
    let stage = stage_tx_bytes(a_rows, tile_n, layout == BLayout::KN) as u64;
    let stream_ns = (waves * unit_blocks * stage) as f64 / SM_STREAM_BYTES_PER_NS;
    let mma_ns = mma_cost(shape, tile_n, splits, ctas) as f64 * MMA_NS_PER_COLUMN_BLOCK;
    let (m, n, k) = (shape.m as f64, shape.n as f64, shape.k as f64);
    let memory_ns = 2.0 * (m * k + k * n + m * n) / HBM_BYTES_PER_NS;
    let fixup = if splits > 1 { FIXUP_WEIGHT * 512 * tile_n as u64 * splits as u64 } else { 0 };
    let ns = stream_ns.max(mma_ns).max(memory_ns) + fixup as f64 / SM_STREAM_BYTES_PER_NS;
    StreamEstimate { ns: ns.round() as u64, l2_bytes: units * unit_blocks * stage }
}

/// The split the GEMM takes unless told otherwise, for tiles `tile_n` wide. A shape with fewer
/// output tiles than three quarters of the `ctas` CTAs leaves SMs idle (at M = 64..128, N =
/// 4096 it has 64 tiles of 64 columns for 132 SMs) and at such sizes the GEMM is bound by
/// reading B: cutting each tile's k-blocks into `floor(ctas / tiles)` units puts every SM to
/// loading (one wave, never a second partial one), each unit keeping at least
/// [`MIN_SPLIT_K_BLOCKS`] k-blocks. Otherwise 1.
pub fn default_split_k(shape: GemmShape, ctas: u32, tile_n: u32) -> u32 {
    let (tiles, k_blocks) = tiles_and_k_blocks(shape, tile_n);
    if tiles == 0 || 4 * tiles >= 3 * ctas as u64 {
        return 1;
    }
    (ctas as u64 / tiles).min(k_blocks / MIN_SPLIT_K_BLOCKS as u64).clamp(1, MAX_SPLIT_K as u64) as u32
}

/// From this many splits on (and when every unit has its own CTA) a tile's units sum their
/// partials together rather than leaving it to the last one. Measured on H200 (docs/PERF.md):
/// at 8 splits the shared sum was faster, at 2 and 4 it lost to the last unit summing alone
/// (every unit then waits for the slowest before its share).
pub const PARALLEL_SUM_MIN_SPLITS: u32 = 8;

/// Output tiles (`tile_n` wide) and k-blocks per tile of `shape`.
fn tiles_and_k_blocks(shape: GemmShape, tile_n: u32) -> (u64, u64) {
    let tiles = shape.m.div_ceil(TILE_M as usize) as u64 * shape.n.div_ceil(tile_n as usize) as u64;
    (tiles, shape.k.div_ceil(TILE_K as usize) as u64)
}

/// Whether the GEMM runs the deep ring unless told otherwise: when its rows are few enough that
/// reading B, not the tensor cores, bounds it (at most [`DEEP_RING_MAX_M`]).
pub fn default_deep_ring(shape: GemmShape) -> bool {
    shape.m <= DEEP_RING_MAX_M
}

/// Most rows for which [`default_deep_ring`] picks the deep ring (and [`default_tile_n`] looks
/// at narrower tiles).
pub const DEEP_RING_MAX_M: usize = 256;

/// The most units a tile is cut into.
pub const MAX_SPLIT_K: u32 = 32;

/// The kernel of a launch: the plain GEMM on either ring, or split-K, or stream-K, per tile
/// width and B layout (the device crate's `mk_gemm_*` entry points).
fn plain_kernel(deep: bool, tile_n: u32, layout: BLayout) -> kernels::Kernel<GemmParams> {
    use kernels::*;
    let [kn, nk] = match (deep, tile_n) {
        (false, _) => [GEMM_KN, GEMM_NK],
        (true, 64) => [GEMM_DEEP_N64_KN, GEMM_DEEP_N64_NK],
        (true, 128) => [GEMM_DEEP_N128_KN, GEMM_DEEP_N128_NK],
        (true, 192) => [GEMM_DEEP_N192_KN, GEMM_DEEP_N192_NK],
        (true, 224) => [GEMM_DEEP_N224_KN, GEMM_DEEP_N224_NK],
        (true, _) => [GEMM_DEEP_KN, GEMM_DEEP_NK],
    };
    layout.pick(kn, nk)
}

/// See [`plain_kernel`].
fn split_kernel(stream: bool, tile_n: u32, layout: BLayout) -> kernels::Kernel<SplitKParams> {
    use kernels::*;
    let [kn, nk] = match (stream, tile_n) {
        (true, _) => [GEMM_STREAMK_KN, GEMM_STREAMK_NK],
        (false, 64) => [GEMM_SPLITK_N64_KN, GEMM_SPLITK_N64_NK],
        (false, 128) => [GEMM_SPLITK_N128_KN, GEMM_SPLITK_N128_NK],
        (false, 192) => [GEMM_SPLITK_N192_KN, GEMM_SPLITK_N192_NK],
        (false, 224) => [GEMM_SPLITK_N224_KN, GEMM_SPLITK_N224_NK],
        (false, _) => [GEMM_SPLITK_KN, GEMM_SPLITK_NK],
    };
    layout.pick(kn, nk)
}

/// A split-K or stream-K launch's parameters and the scratch it owns.
struct SplitLaunch {
    params: SplitKParams,
    stream: bool,
    kernel: kernels::Kernel<SplitKParams>,
    _workspace: DeviceBuffer<f32>,
    _counters: DeviceBuffer<u32>,
    _launches: DeviceBuffer<u64>,
}

/// A GEMM bound to its buffers: tensor maps encoded and uploaded once, launched many times.
pub struct Gemm<'a> {
    shape: GemmShape,
    params: GemmParams,
    ctas: u32,
    tile_n: u32,
    kernel: kernels::Kernel<GemmParams>,
    split: Option<SplitLaunch>,
    smem: u32,
    _maps: DeviceBuffer<TensorMap>,
    diag: DiagBuffers,
    _bufs: PhantomData<&'a ()>,
}

impl<'a> Gemm<'a> {
    /// Validate, encode the tensor maps and prepare the launch. Nothing runs yet.
    pub fn new(
        gpu: &Gpu,
        shape: GemmShape,
        b_layout: BLayout,
        a: impl Into<DeviceSlice<'a, bf16>>,
        b: impl Into<DeviceSlice<'a, bf16>>,
        c: Output<'a>,
        opts: GemmOptions,
    ) -> Result<Self> {
        let (a, b) = (a.into(), b.into());
        shape.validate(a.len(), b.len(), c.len())?;
        Self::at(gpu, shape, b_layout, (a.addr(), b.addr()), (&c).into(), opts)
    }

    /// [`Gemm::new`] on raw device addresses, after the caller checked the sizes (fused ops'
    /// unfused paths, whose buffers live in the communicator's heap).
    pub(crate) fn at(
        gpu: &Gpu,
        shape: GemmShape,
        b_layout: BLayout,
        (a, b): (u64, u64),
        c: CAddr,
        opts: GemmOptions,
    ) -> Result<Self> {
        let ctas = persistent_ctas(gpu, &opts)?;
        let tile_n = opts.tile_n.unwrap_or_else(|| default_tile_n(shape, b_layout, ctas));
        if !TILE_WIDTHS.contains(&tile_n) {
            return Err(invalid("tile_n", format!("{tile_n}: must be one of {TILE_WIDTHS:?}")));
        }
        if tile_n != TILE_N && opts.deep_ring == Some(false) {
            return Err(invalid("tile_n", format!("{tile_n}: tiles other than {TILE_N} wide run only the deep ring")));
        }
        let (tiles, k_blocks) = tiles_and_k_blocks(shape, tile_n);
        // The shape's dimensions are below 2^31 (validated): the tile count fits a u32.
        let (tiles, k_blocks) = (tiles as u32, k_blocks as u32);
        let splits = opts.split_k.unwrap_or_else(|| default_split_k(shape, ctas, tile_n));
        if splits == 0 || splits > k_blocks.min(MAX_SPLIT_K) {
            return Err(invalid(
                "split_k",
                format!(
                    "{splits}: must be 1..={} (at most {MAX_SPLIT_K} and the k-blocks, ceil({} / {TILE_K}))",
                    k_blocks.min(MAX_SPLIT_K),
                    shape.k
                ),
            ));
        }
        let stream = opts.stream_k;
        if stream {
            if splits > 1 {
                return Err(invalid("stream_k", "cannot be combined with split_k above 1"));
            }
            if tile_n != TILE_N {
                return Err(invalid("stream_k", format!("runs {TILE_N}-wide tiles only, not tile_n = {tile_n}")));
            }
            if tiles > ctas || (tiles as u64) * (k_blocks as u64) >= 1 << 32 {
                return Err(invalid(
                    "stream_k",
                    format!(
                        "needs at most one tile per CTA ({tiles} tiles, {ctas} CTAs) and tiles x k-blocks below 2^32"
                    ),
                ));
            }
        }
        let ctas = if stream { ctas } else { ctas.min(tiles.saturating_mul(splits)) };
        let deep =
            opts.deep_ring.unwrap_or_else(|| default_deep_ring(shape)) || splits > 1 || stream || tile_n != TILE_N;
        // The deep ring streams B from memory: with B [N, K] its loads also fetch the next
        // k-block's bytes. With B [K, N] a k-block's boxes lie side by side in each row, and the
        // wider promotion measured 2.7% slower over the small shapes (docs/PERF.md).
        let promotion = if deep && b_layout == BLayout::NK { L2Promotion::B256 } else { L2Promotion::B128 };
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let opts = GemmOptions { tile_n: Some(tile_n), ..opts };
        let a_rows = a_box_rows(shape.m as u32);
        let (mut params, maps) = plan(gpu, shape, b_layout, a, b, c, &opts, &diag, (promotion, a_rows))?;
        params.roles = RoleSplit::compute_only(ctas);
        let kernel = plain_kernel(deep, tile_n, b_layout);
        // Partial slots per tile: the splits, or the CTAs a stream-K tile can span.
        let grid = TileGrid::new(shape.m as u32, shape.n as u32, TILE_M, tile_n, opts.group_m);
        let slots = if stream { StreamK::new(grid, k_blocks, ctas).slots() } else { splits };
        let split = if splits > 1 || stream {
            let halves = 2 * tiles as usize;
            let workspace = gpu.alloc::<f32>(halves * slots as usize * split_half_bytes(tile_n) as usize / 4)?;
            let counters = gpu.upload(&vec![0u32; halves])?;
            let launches = gpu.upload(&[0u64])?;
            let kernel = split_kernel(stream, tile_n, b_layout);
            Some(SplitLaunch {
                params: SplitKParams {
                    gemm: params,
                    workspace: workspace.addr(),
                    counters: counters.addr(),
                    launches: launches.addr(),
                    splits: slots,
                    // Every unit its own CTA: a tile's units all run at once and can sum
                    // together, each its share.
                    parallel: (!stream && ctas == tiles * splits && splits >= PARALLEL_SUM_MIN_SPLITS) as u32,
                },
                stream,
                kernel,
                _workspace: workspace,
                _counters: counters,
                _launches: launches,
            })
        } else {
            None
        };
        let smem = if deep { deep_smem_bytes(tile_n) } else { SMEM_BYTES };
        Ok(Self { shape, params, ctas, tile_n, kernel, split, smem, _maps: maps, diag, _bufs: PhantomData })
    }

    /// Output tile width in columns.
    pub fn tile_n(&self) -> u32 {
        self.tile_n
    }

    /// Units each output tile's k-blocks are cut into (1: the plain GEMM or stream-K).
    pub fn splits(&self) -> u32 {
        self.split.as_ref().filter(|s| !s.stream).map_or(1, |s| s.params.splits)
    }

    /// Whether the launch is stream-K.
    pub fn stream_k(&self) -> bool {
        self.split.as_ref().is_some_and(|s| s.stream)
    }

    /// The shape.
    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    /// Persistent CTAs launched.
    pub fn ctas(&self) -> u32 {
        self.ctas
    }

    /// Enqueue one product on `gpu`'s stream (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        let cfg = LaunchConfig::linear(self.ctas, THREADS, self.smem);
        // SAFETY: the tensor maps, buffers, split-K scratch and diagnostics block are borrowed
        // for 'a / owned by self, validated against the shape above, and outlive the launch as
        // long as the caller synchronises before dropping them (run() does). Launches on one
        // stream run in order, and each takes the next epoch of the split-K counters.
        unsafe {
            match &self.split {
                Some(s) => gpu.launch(s.kernel, &cfg, &s.params)?,
                None => gpu.launch(self.kernel, &cfg, &self.params)?,
            }
        };
        Ok(())
    }

    /// Launch, wait, and turn a device-side timeout into [`Error::DeviceTimeout`].
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.diag.wait(gpu, "gemm", || Ok(()))
    }

    /// Return the device's wait report, if a wait of an earlier launch gave up.
    pub fn check_diag(&self) -> Result<()> {
        self.diag.check()
    }
}

/// The gathered GEMM `C[i, :] = A[rows[i], :] @ B` (bf16 in, f32 accumulate, bf16 or f32
/// out): the engine on the staged ring in 256-column tiles, its producer warpgroup copying A's
/// rows one by one (`cp.async`, 16 bytes a thread) where a tensor map of A would load boxes.
/// What a grouped GEMM over routed tokens needs without first copying each token to its
/// experts' rows. `rows` holds `shape.m` indices into A's `a_rows` rows; `u32::MAX` makes a row
/// of zeros (padding), any other index past A is reported by [`GatherGemm::run`] as an error
/// naming the entry (its row stays zero).
pub struct GatherGemm<'a> {
    shape: GemmShape,
    params: GatherGemmParams,
    ctas: u32,
    kernel: kernels::Kernel<GatherGemmParams>,
    errors: DeviceBuffer<u32>,
    _maps: DeviceBuffer<TensorMap>,
    diag: DiagBuffers,
    _bufs: PhantomData<&'a ()>,
}

impl<'a> GatherGemm<'a> {
    /// Validate and prepare: A is `[a_rows, shape.k]` bf16 (row-major, 16-byte aligned), `rows`
    /// `shape.m` entries, B and C as for [`Gemm::new`]. Of `opts`, `ctas`, `group_m` and
    /// `timeout` apply (the tiles are 256 wide, on the staged ring).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        gpu: &Gpu,
        shape: GemmShape,
        b_layout: BLayout,
        a: impl Into<DeviceSlice<'a, bf16>>,
        rows: impl Into<DeviceSlice<'a, u32>>,
        b: impl Into<DeviceSlice<'a, bf16>>,
        c: Output<'a>,
        opts: GemmOptions,
    ) -> Result<Self> {
        let (a, rows, b) = (a.into(), rows.into(), b.into());
        let k = shape.k.max(1);
        // C and B as for the plain GEMM; A is checked here, by whole rows.
        shape.validate(shape.m * k, b.len(), c.len())?;
        if !a.len().is_multiple_of(k) || a.is_empty() {
            return Err(invalid("a", format!("holds {} elements: must be whole rows of k = {k}", a.len())));
        }
        let a_rows = a.len() / k;
        if a_rows > u32::MAX as usize - 1 {
            return Err(invalid("a", format!("{a_rows} rows: at most 2^32 - 2")));
        }
        if !a.addr().is_multiple_of(16) || !shape.k.is_multiple_of(8) {
            return Err(invalid(
                "a",
                format!(
                    "address {:#x} and k = {} must be 16-byte multiples (rows move in 16-byte pieces)",
                    a.addr(),
                    shape.k
                ),
            ));
        }
        if rows.len() != shape.m {
            return Err(invalid("rows", format!("holds {} entries; C has m = {} rows", rows.len(), shape.m)));
        }
        let ctas = persistent_ctas(gpu, &opts)?;
        let (tiles, _) = tiles_and_k_blocks(shape, TILE_N);
        let ctas = ctas.min(tiles as u32);
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let opts = GemmOptions { tile_n: Some(TILE_N), ..opts };
        // B's and C's maps as for the plain GEMM. A's map is encoded too (plan's third map) but
        // never read: the producer gathers the rows.
        let (mut gemm, maps) =
            plan(gpu, shape, b_layout, a.addr(), b.addr(), (&c).into(), &opts, &diag, (L2Promotion::B128, TILE_M))?;
        gemm.roles = RoleSplit::compute_only(ctas);
        let errors = gpu.upload(&[0u32; 4])?;
        let params = GatherGemmParams {
            gemm,
            a: a.addr(),
            rows: rows.addr(),
            errors: errors.addr(),
            a_stride: (2 * shape.k) as u32,
            a_rows: a_rows as u32,
        };
        let kernel = b_layout.pick(kernels::GEMM_GATHER_KN, kernels::GEMM_GATHER_NK);
        Ok(Self { shape, params, ctas, kernel, errors, _maps: maps, diag, _bufs: PhantomData })
    }

    /// The shape (`m`: rows of C).
    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    /// Enqueue one product on `gpu`'s stream (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        let cfg = LaunchConfig::linear(self.ctas, THREADS, SMEM_BYTES);
        // SAFETY: A, the row table, B and C are borrowed for 'a and were checked against the
        // shape; the maps, error words and diagnostics are owned by self.
        unsafe { gpu.launch(self.kernel, &cfg, &self.params)? };
        Ok(())
    }

    /// Launch, wait, and report a device-side timeout or a row index past A.
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.diag.wait(gpu, "gemm-gather", || Ok(()))?;
        let e = self.errors.to_vec()?;
        if e[0] != 0 {
            self.errors.copy_from(&[0; 4])?;
            let what = format!(
                "rows[{}] = {} is past A's {} rows (that row of C was computed from zeros)",
                e[1], e[2], self.params.a_rows
            );
            return Err(Error::DeviceInput { op: "gemm-gather", what });
        }
        Ok(())
    }
}

/// The rows of `a` (`k` elements each) that `rows` picks, in order; `u32::MAX` (or any index past
/// `a`) gives a row of zeros, as [`GatherGemm`] reads it.
pub fn gather_rows(a: &[bf16], rows: &[u32], k: usize) -> Vec<bf16> {
    let zero = vec![bf16::ZERO; k];
    rows.iter().flat_map(|&r| a.get(r as usize * k..(r as usize + 1) * k).unwrap_or(&zero).iter().copied()).collect()
}

/// The persistent CTAs `opts` asks for (one per SM by default), after checking `group_m` and
/// `ctas`.
fn persistent_ctas(gpu: &Gpu, opts: &GemmOptions) -> Result<u32> {
    if opts.group_m == 0 {
        return Err(invalid("group_m", "must be at least 1"));
    }
    let sms = gpu.info().sm_count;
    let ctas = opts.ctas.unwrap_or(sms);
    if ctas == 0 || ctas > sms {
        return Err(invalid(
            "ctas",
            format!("{ctas} must be in 1..={sms}: the CTAs are persistent, one per SM at most (some modes need them all resident at once)"),
        ));
    }
    Ok(ctas)
}

/// Where C goes: a device address, f32 or bf16 elements.
#[derive(Clone, Copy, Debug)]
pub(crate) struct CAddr {
    pub addr: u64,
    pub f32: bool,
}

impl From<&Output<'_>> for CAddr {
    fn from(c: &Output<'_>) -> Self {
        CAddr { addr: c.addr(), f32: matches!(c, Output::F32(_)) }
    }
}

/// The GEMM parameter block and its tensor maps (A `[m, k]` at `a` in boxes of `a_rows` rows,
/// which the kernel's mainloop must expect: [`TILE_M`] in the fused kernels, `a_box_rows(m)` in
/// the plain GEMM's; B at `b` in boxes for tiles `opts.tile_n` wide ([`TILE_N`] if unset), C
/// from `c`; the operands' loads with L2 promotion `promotion`), with no CTAs assigned yet: what
/// the plain GEMM and every fused op built on the engine share.
#[allow(clippy::too_many_arguments)]
pub(crate) fn plan(
    gpu: &Gpu,
    shape: GemmShape,
    b_layout: BLayout,
    a: u64,
    b: u64,
    c: CAddr,
    opts: &GemmOptions,
    diag: &DiagBuffers,
    (promotion, a_rows): (L2Promotion, u32),
) -> Result<(GemmParams, DeviceBuffer<TensorMap>)> {
    // TMA reads A and B (and stores bf16 C) from 16-byte aligned bases; said here, by name,
    // rather than as the tensor map's rule.
    for (arg, addr) in [("a", a), ("b", b), ("c", c.addr)] {
        super::check_aligned16(arg, addr, "TMA moves it")?;
    }
    let tile_n = opts.tile_n.unwrap_or(TILE_N);
    let (m, n, kk) = (shape.m as u64, shape.n as u64, shape.k as u64);
    let sw = |base, dims, row, box_dims| Tile2d { promotion, ..bf16_sw128(base, dims, row, box_dims) };
    let a_map = sw(a, [kk, m], 2 * kk, [TILE_K, a_rows]);
    let b_map = match b_layout {
        BLayout::NK => sw(b, [kk, n], 2 * kk, [TILE_K, tile_n]),
        BLayout::KN => sw(b, [n, kk], 2 * n, [64, TILE_K]),
    };
    // The bf16 output map; unused (but still valid) for f32 output.
    let c_map = bf16_sw128(c.addr, [n, m], if c.f32 { 4 * n } else { 2 * n }, [64, 64]);
    let maps = gpu.upload_tensor_maps(&[a_map, b_map, c_map])?;
    let params = GemmParams {
        a_map: maps.addr(),
        b_map: maps.addr() + 128,
        c_map: maps.addr() + 256,
        c: c.addr,
        diag: diag.abi(),
        timeout_ns: opts.timeout.as_nanos().min(u64::MAX as u128) as u64,
        m: shape.m as u32,
        n: shape.n as u32,
        k: shape.k as u32,
        b_layout: b_layout.pick(B_KN, B_NK),
        out_f32: c.f32 as u32,
        group_m: opts.group_m,
        roles: RoleSplit::default(),
    };
    Ok((params, maps))
}

/// A bf16 matrix's tensor map with 128-byte swizzle (how the engine reads operands and stores
/// C): `dims` (inner, outer) elements, `row` bytes between rows, `box_dims` elements per box.
pub(crate) fn bf16_sw128(base: u64, dims: [u64; 2], row: u64, box_dims: [u32; 2]) -> Tile2d {
    Tile2d {
        base,
        dtype: TmaDtype::Bf16,
        dims,
        row_stride_bytes: row,
        box_dims,
        swizzle: Swizzle::B128,
        promotion: L2Promotion::B128,
    }
}

/// Row `i` of `A @ B` computed on the host in f64 from the bf16 inputs (the test reference).
pub fn reference_row(a: &[bf16], b: &[bf16], shape: GemmShape, layout: BLayout, i: usize) -> Vec<f64> {
    reference_row_bounded(a, b, shape, layout, i).0
}

/// The products one tensor-core step adds to an fp32 accumulator (one wgmma's K).
const MMA_K: usize = 16;

/// [`reference_row`], and for each element a bound on what accumulating it in fp32 on the
/// tensor cores, K ascending as the engine does, can add. Each step of 16 products (`MMA_K`) is
/// held to one truncation per term (the products and the running sum) of 2^-23 of the step's
/// largest magnitude. A sum whose large products cancel needs this: its fp32 error follows the
/// running sum and the products, not the small result (a bound on the result's size alone
/// once failed a correct all-reduce, docs/PERF.md).
pub fn reference_row_bounded(
    a: &[bf16],
    b: &[bf16],
    shape: GemmShape,
    layout: BLayout,
    i: usize,
) -> (Vec<f64>, Vec<f64>) {
    let GemmShape { n, k, .. } = shape;
    let arow: Vec<f64> = a[i * k..(i + 1) * k].iter().map(|x| x.to_f64()).collect();
    let step = |bound: &mut f64, largest: f64| *bound += (MMA_K + 1) as f64 * 2f64.powi(-23) * largest;
    let (mut out, mut bound) = (vec![0.0f64; n], vec![0.0f64; n]);
    match layout {
        // Step by step over K, every column at once (B's rows read in order).
        BLayout::KN => {
            let mut largest = vec![0.0f64; n];
            for (k0, achunk) in arow.chunks(MMA_K).enumerate() {
                for (m, o) in largest.iter_mut().zip(&out) {
                    *m = o.abs();
                }
                for (dk, &av) in achunk.iter().enumerate() {
                    let brow = &b[(k0 * MMA_K + dk) * n..][..n];
                    for ((o, m), bv) in out.iter_mut().zip(&mut largest).zip(brow) {
                        let p = av * bv.to_f64();
                        *o += p;
                        *m = m.max(p.abs());
                    }
                }
                for (e, &m) in bound.iter_mut().zip(&largest) {
                    step(e, m);
                }
            }
        }
        // Column by column (B's rows are columns of the product).
        BLayout::NK => {
            for (j, (o, e)) in out.iter_mut().zip(&mut bound).enumerate() {
                for (achunk, bchunk) in arow.chunks(MMA_K).zip(b[j * k..(j + 1) * k].chunks(MMA_K)) {
                    let mut largest = o.abs();
                    for (&av, bv) in achunk.iter().zip(bchunk) {
                        let p = av * bv.to_f64();
                        *o += p;
                        largest = largest.max(p.abs());
                    }
                    step(e, largest);
                }
            }
        }
    }
    (out, bound)
}

// Keep the device's tile constants visible where the host sizes launches.
const _: () = assert!(k::THREADS == 384 && k::TILE_M == 128 && k::TILE_N == 256);

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(m: usize, n: usize, k: usize) -> GemmShape {
        GemmShape { m, n, k }
    }

    #[test]
    fn tile_width_takes_the_least_estimated_time() {
        let w = |m, n, k| default_tile_n(shape(m, n, k), BLayout::NK, 132);
        // N = 8192: 32 tiles of 256 columns per tile row (4 splits); 64-column tiles make 128
        // of them, no split.
        assert_eq!(w(1, 8192, 8192), 64);
        assert_eq!(w(64, 8192, 8192), 64);
        assert_eq!(w(128, 8192, 8192), 64);
        // Two tile rows: 128-column tiles make 128 (64-column ones would take two waves).
        assert_eq!(w(256, 8192, 8192), 128);
        // N = 28672: up to 128 rows memory bounds every width, and 256-column tiles load the
        // fewest bytes; at 256 rows the tensor cores bound it, and 224 columns make two full
        // waves (256 tiles) where 256 leave 40 SMs idle in the second (224 tiles).
        assert_eq!(w(1, 28672, 8192), 256);
        assert_eq!(w(64, 28672, 8192), 256);
        assert_eq!(w(128, 28672, 8192), 256);
        assert_eq!(w(256, 28672, 8192), 224);
        // B [K, N] loads 224-column tiles in four whole 64-column boxes: still less work.
        let kn = |m, n, k| default_tile_n(shape(m, n, k), BLayout::KN, 132);
        assert_eq!(kn(256, 28672, 8192), 224);
        // Two tile rows of N = 12288: 128 tiles of 192 columns, one wave (256: 96 tiles).
        assert_eq!(w(256, 12288, 12288), 192);
        // N = 4096: 64 columns and two splits at one tile row; at two tile rows 128 columns
        // and two splits stream less than 64 columns unsplit (each stage then is 2/3 A).
        assert_eq!(w(64, 4096, 14336), 64);
        assert_eq!(w(256, 4096, 14336), 128);
        // Compute-bound: the widest, unless 192 or 224 columns take a whole wave's worth less:
        // three tile rows of N = 8192 make 96 tiles of 256 or 129 of 192, one wave either way;
        // 512 rows of N = 28672 four waves of 256 or of 224; 4096 rows of N = 1536 two waves of
        // 256 or of 192.
        assert_eq!(w(257, 8192, 8192), 192);
        assert_eq!(w(512, 28672, 8192), 224);
        assert_eq!(w(4096, 1536, 8192), 192);
        assert_eq!(w(512, 8192, 8192), 256);
        assert_eq!(w(4096, 28672, 8192), 256);
        // 16 waves of 256 or 18 of 224 (1.6% less), 21 of 192 (1.6% less): not worth the
        // staging tiles.
        assert_eq!(w(8192, 8192, 8192), 256);
        // A tiny shape: one tile whatever the width, the narrowest streams least.
        assert_eq!(w(1, 8, 8), 64);
    }

    #[test]
    fn mma_cost_counts_waves_of_tile_columns() {
        // 256 x 28672: 224 tiles of 256 in two waves, 256 of 224 in two waves; 128 k-blocks.
        assert_eq!(mma_cost(shape(256, 28672, 8192), 256, 1, 132), 2 * 128 * 256);
        assert_eq!(mma_cost(shape(256, 28672, 8192), 224, 1, 132), 2 * 128 * 224);
        // Splits shorten each unit and multiply the units.
        assert_eq!(mma_cost(shape(64, 8192, 8192), 256, 4, 132), 32 * 256);
        assert_eq!(mma_cost(shape(64, 8192, 8192), 256, 5, 132), 2 * 26 * 256);
    }

    #[test]
    fn stream_estimate_takes_the_slowest_bound_then_the_fixup() {
        use rates::*;
        let est = |m, n, k, layout, w, splits| stream_estimate(shape(m, n, k), layout, w, splits, 132);
        let ns = |x: f64| x.round() as u64;
        // 1 x 8192 x 8192 in 64-column tiles: 128 tiles, one wave, 128 stages of an 8-row A box
        // (1 KiB) and 64 columns of B (8 KiB): memory (reading the 128 MiB B once) bounds it.
        let memory = 2.0 * (8192.0 + 8192.0 * 8192.0 + 8192.0) / HBM_BYTES_PER_NS;
        let e = est(1, 8192, 8192, BLayout::NK, 64, 1);
        assert_eq!(e, StreamEstimate { ns: ns(memory), l2_bytes: 128 * 128 * (1024 + 8192) });
        assert!(128.0 * 9216.0 / SM_STREAM_BYTES_PER_NS < memory);
        // The same in 256-column tiles, 4 splits: 32 stages of 1 + 32 KiB per unit, and the
        // fixup after.
        let fixup = (FIXUP_WEIGHT * 512 * 256 * 4) as f64 / SM_STREAM_BYTES_PER_NS;
        assert_eq!(est(1, 8192, 8192, BLayout::NK, 256, 4).ns, ns(memory + fixup));
        // Two waves of 128 stages of 16 + 8 KiB: the busiest SM's loads bound it.
        let stream = 2.0 * 128.0 * (16384.0 + 8192.0) / SM_STREAM_BYTES_PER_NS;
        assert_eq!(est(256, 8192, 8192, BLayout::NK, 64, 1).ns, ns(stream));
        // 256 x 28672: two waves either way, the tensor cores bound it: 224 columns do less.
        let mma = |w: f64| 2.0 * 128.0 * w * MMA_NS_PER_COLUMN_BLOCK;
        assert_eq!(est(256, 28672, 8192, BLayout::NK, 256, 1).ns, ns(mma(256.0)));
        assert_eq!(est(256, 28672, 8192, BLayout::NK, 224, 1).ns, ns(mma(224.0)));
        // B [K, N] at 224 columns loads four whole boxes (32 KiB), B [N, K] 224 rows (28 KiB):
        // where memory bounds both, the [K, N] tiles load more than 256-column ones.
        let kn = |w| est(64, 28672, 8192, BLayout::KN, w, 1);
        assert_eq!(kn(224).l2_bytes, 128 * 128 * (8192 + 32768));
        assert_eq!(est(64, 28672, 8192, BLayout::NK, 224, 1).l2_bytes, 128 * 128 * (8192 + 28672));
        assert_eq!(kn(224).ns, kn(256).ns);
        assert!(kn(256) < kn(224));
    }

    #[test]
    fn split_k_fills_one_wave_when_tiles_are_few() {
        let split = |m, n, k, w| default_split_k(shape(m, n, k), 132, w);
        // One tile row of N = 8192 in 256-column tiles: 32 tiles, four units each (128 CTAs busy).
        assert_eq!(split(64, 8192, 8192, 256), 4);
        assert_eq!(split(1, 8192, 8192, 256), 4);
        assert_eq!(split(256, 8192, 8192, 256), 2);
        assert_eq!(split(64, 4096, 14336, 256), 8);
        // The default widths: N = 8192 needs no split; N = 4096 two units of 64 tiles.
        assert_eq!(split(64, 8192, 8192, 64), 1);
        assert_eq!(split(256, 8192, 8192, 128), 1);
        assert_eq!(split(64, 4096, 14336, 64), 2);
        // Enough tiles (112 of 132 SMs, or more) or too few k-blocks: no split.
        assert_eq!(split(64, 28672, 8192, 256), 1);
        assert_eq!(split(8192, 8192, 8192, 256), 1);
        assert_eq!(split(64, 8192, 64, 256), 1);
        assert_eq!(split(64, 8192, 512, 256), 2);
        // Never more units than CTAs.
        for &(m, n, k) in &[(1usize, 8usize, 8usize), (64, 256, 1 << 20), (130, 2048, 4096), (1, 8, 1 << 16)] {
            for w in TILE_WIDTHS {
                let s = split(m, n, k, w);
                let tiles = (m.div_ceil(128) * n.div_ceil(w as usize)) as u32;
                assert!((1..=MAX_SPLIT_K).contains(&s) && (s == 1 || tiles * s <= 132), "{m}x{n}x{k} w{w}: {s}");
            }
        }
    }

    #[test]
    fn reference_bound_covers_fp32_accumulation_where_the_sum_cancels() {
        use crate::testing::Rng;
        // K = 200: a last step of 8 products. Column 1 cancels: its second half of products is
        // the first half negated, so its result is 0 and its running sum is not.
        let (n, k) = (5usize, 200usize);
        let mut rng = Rng::new(7);
        let mut a = rng.bf16_vec(k);
        let mut kn = rng.bf16_vec(k * n);
        for kk in 0..k / 2 {
            a[kk + k / 2] = a[kk];
            kn[(kk + k / 2) * n + 1] = -kn[kk * n + 1];
        }
        let nk: Vec<bf16> = (0..n * k).map(|x| kn[(x % k) * n + x / k]).collect();
        let shape = GemmShape { m: 1, n, k };
        let (exact, bound) = reference_row_bounded(&a, &kn, shape, BLayout::KN, 0);
        // Both layouts take the same steps in the same order: the same bits.
        assert_eq!((exact.clone(), bound.clone()), reference_row_bounded(&a, &nk, shape, BLayout::NK, 0));
        for j in 0..n {
            // fp32, rounded after every product: one model the bound must cover.
            let f32_sum = (0..k).fold(0f32, |s, kk| s + a[kk].to_f32() * kn[kk * n + j].to_f32());
            let err = (f32_sum as f64 - exact[j]).abs();
            let products: f64 = (0..k).map(|kk| (a[kk].to_f64() * kn[kk * n + j].to_f64()).abs()).sum();
            assert!(err <= bound[j], "column {j}: error {err:e} beyond {:e}", bound[j]);
            // Tight for the tensor cores' step model: within the textbook bound K * 2^-23 * sum |ab|.
            assert!(bound[j] <= k as f64 * 2f64.powi(-23) * products, "column {j}");
            assert!(bound[j] > 0.0);
        }
        // The cancelling column: a result-relative bound would be 0; this one follows the
        // running sum.
        assert!(exact[1] == 0.0 && bound[1] > 1e-6, "{}", bound[1]);
    }

    #[test]
    fn operand_elements_count_a_b_and_c_and_never_overflow() {
        assert_eq!(GemmShape { m: 2, n: 3, k: 4 }.operand_elements(), Some(8 + 12 + 6));
        assert_eq!(GemmShape { m: usize::MAX / 2, n: 4, k: 4 }.operand_elements(), None);
        assert_eq!(GemmShape { m: 1 << 40, n: 1 << 40, k: 1 }.operand_elements(), None);
    }
}
