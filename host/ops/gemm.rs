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
use crate::abi::{GemmParams, RoleSplit, SplitKParams, B_KN, B_NK, SPLIT_HALF_BYTES};
use crate::error::{invalid, need_len, DiagBuffers, Error, Result};
use crate::gpu::{
    kernels, DeviceBuffer, DeviceSlice, Gpu, L2Promotion, LaunchConfig, Swizzle, TensorMap, Tile2d, TmaDtype,
};
use crate::sched::{KSplit, StreamK, TileGrid};
use half::bf16;
use mkernel_device::kernels_info::gemm as k;
use std::marker::PhantomData;
use std::time::Duration;

pub use mkernel_device::kernels_info::gemm::{DEEP_SMEM_BYTES, SMEM_BYTES, THREADS, TILE_K, TILE_M, TILE_N};

/// Layout of B.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BLayout {
    /// `[k, n]` row-major.
    KN,
    /// `[n, k]` row-major (the layout of a torch `Linear` weight).
    NK,
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
    /// Stream-K: every CTA takes an equal, contiguous run of the tiles' k-blocks (at most one
    /// tile per CTA; not with a split above 1). None: [`default_stream_k`] when not split.
    pub stream_k: Option<bool>,
    /// The deep shared-memory ring (`DEEP_STAGES` stages, stores straight from registers)
    /// rather than the staged one (`STAGES`, bf16 through staging tiles and TMA stores).
    /// Split-K and stream-K always run deep. None: [`default_deep_ring`].
    pub deep_ring: Option<bool>,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for GemmOptions {
    fn default() -> Self {
        Self {
            ctas: None,
            group_m: 8,
            split_k: None,
            stream_k: None,
            deep_ring: None,
            timeout: Duration::from_secs(10),
        }
    }
}

impl GemmOptions {
    /// These options with every tile computed whole by one CTA (no split-K, no stream-K): what
    /// a fused op's unfused reference needs to sum in the fused kernel's order.
    pub fn whole_tiles(self) -> Self {
        Self { split_k: Some(1), stream_k: Some(false), ..self }
    }
}

/// Fewest k-blocks a split-K unit gets from [`default_split_k`]: below this the fixup (every
/// unit writes and the last reads a 128 KiB f32 partial) outweighs the loads it spreads.
pub const MIN_SPLIT_K_BLOCKS: u32 = 4;

/// The split the GEMM takes unless told otherwise. A shape with fewer output tiles than three
/// quarters of the `ctas` CTAs leaves SMs idle (at M = 64..128 and N = 8192 it has 32 tiles
/// for 132 SMs) and at such sizes the GEMM is bound by reading B: cutting each tile's k-blocks
/// into `floor(ctas / tiles)` units puts every SM to loading (one wave, never a second partial
/// one), each unit keeping at least [`MIN_SPLIT_K_BLOCKS`] k-blocks. Otherwise 1.
pub fn default_split_k(shape: GemmShape, ctas: u32) -> u32 {
    let (tiles, k_blocks) = tiles_and_k_blocks(shape);
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

/// Whether the GEMM takes stream-K unless told otherwise: when its tiles fill three quarters of
/// the `ctas` CTAs or more (too many to split evenly, see [`default_split_k`]) but fewer than all
/// of them (at N = 28672: 112 tiles for 132 SMs), so that every CTA does the same work instead of
/// 20 idling, each keeping at least [`MIN_SPLIT_K_BLOCKS`] k-blocks; and only up to
/// [`STREAM_K_MAX_M`] rows. Measured on H200 (docs/PERF.md): at 1 x 28672 x 8192 stream-K took
/// 0.16 ms to 0.15 (0.73x cuBLAS to 0.86x), at M = 64 and 128 it was no faster or slower (its
/// partial sums cost more than the idle SMs there).
pub fn default_stream_k(shape: GemmShape, ctas: u32) -> bool {
    let (tiles, k_blocks) = tiles_and_k_blocks(shape);
    let ctas = ctas as u64;
    shape.m <= STREAM_K_MAX_M
        && 4 * tiles >= 3 * ctas
        && tiles < ctas
        && tiles * k_blocks >= MIN_SPLIT_K_BLOCKS as u64 * ctas
        && tiles * k_blocks < 1 << 32
}

/// Output tiles and k-blocks per tile of `shape`.
fn tiles_and_k_blocks(shape: GemmShape) -> (u64, u64) {
    let tiles = shape.m.div_ceil(TILE_M as usize) as u64 * shape.n.div_ceil(TILE_N as usize) as u64;
    (tiles, shape.k.div_ceil(TILE_K as usize) as u64)
}

/// Whether the GEMM runs the deep ring unless told otherwise: when its rows are few enough that
/// reading B, not the tensor cores, bounds it (at most [`DEEP_RING_MAX_M`]).
pub fn default_deep_ring(shape: GemmShape) -> bool {
    shape.m <= DEEP_RING_MAX_M
}

/// Most rows for which [`default_deep_ring`] picks the deep ring.
pub const DEEP_RING_MAX_M: usize = 256;

/// Most rows for which [`default_stream_k`] picks stream-K.
pub const STREAM_K_MAX_M: usize = 32;

/// The most units a tile is cut into.
pub const MAX_SPLIT_K: u32 = 32;

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
        if opts.group_m == 0 {
            return Err(invalid("group_m", "must be at least 1"));
        }
        let sms = gpu.info().sm_count;
        let ctas = opts.ctas.unwrap_or(sms);
        if ctas == 0 {
            return Err(invalid("ctas", "must be at least 1"));
        }
        let (tiles, k_blocks) = tiles_and_k_blocks(shape);
        // The shape's dimensions are below 2^31 (validated): the tile count fits a u32.
        let (tiles, k_blocks) = (tiles as u32, k_blocks as u32);
        let splits = opts.split_k.unwrap_or_else(|| default_split_k(shape, ctas));
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
        let stream = opts.stream_k.unwrap_or_else(|| splits == 1 && default_stream_k(shape, ctas));
        if stream {
            if splits > 1 {
                return Err(invalid("stream_k", "cannot be combined with split_k above 1"));
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
        let deep = opts.deep_ring.unwrap_or_else(|| default_deep_ring(shape)) || splits > 1 || stream;
        // The deep ring streams B from memory: its loads also fetch the next k-block's bytes.
        let promotion = if deep { L2Promotion::B256 } else { L2Promotion::B128 };
        let diag = DiagBuffers::new(gpu)?;
        let (mut params, maps) = plan(gpu, shape, b_layout, a, b, c, &opts, &diag, promotion)?;
        params.roles = RoleSplit::compute_only(ctas);
        let kernel = match (deep, b_layout) {
            (false, BLayout::KN) => kernels::GEMM_KN,
            (false, BLayout::NK) => kernels::GEMM_NK,
            (true, BLayout::KN) => kernels::GEMM_DEEP_KN,
            (true, BLayout::NK) => kernels::GEMM_DEEP_NK,
        };
        // Partial slots per tile: the splits, or the CTAs a stream-K tile can span.
        let grid = TileGrid::new(shape.m as u32, shape.n as u32, TILE_M, TILE_N, opts.group_m);
        let slots = if stream { StreamK::new(grid, k_blocks, ctas).slots() } else { splits };
        let split = if splits > 1 || stream {
            let halves = 2 * tiles as usize;
            let workspace = gpu.alloc::<f32>(halves * slots as usize * SPLIT_HALF_BYTES as usize / 4)?;
            let counters = gpu.upload(&vec![0u32; halves])?;
            let launches = gpu.upload(&[0u64])?;
            let kernel = match (stream, b_layout) {
                (true, BLayout::KN) => kernels::GEMM_STREAMK_KN,
                (true, BLayout::NK) => kernels::GEMM_STREAMK_NK,
                (false, BLayout::KN) => kernels::GEMM_SPLITK_KN,
                (false, BLayout::NK) => kernels::GEMM_SPLITK_NK,
            };
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
        let smem = if deep { DEEP_SMEM_BYTES } else { SMEM_BYTES };
        Ok(Self { shape, params, ctas, kernel, split, smem, _maps: maps, diag, _bufs: PhantomData })
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
        let sync = gpu.synchronize();
        self.check_diag()?;
        sync.map_err(Error::from)
    }

    /// Return the device's wait report, if a wait of an earlier launch gave up.
    pub fn check_diag(&self) -> Result<()> {
        self.diag.check()
    }
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

/// The GEMM parameter block and its tensor maps (A `[m, k]` at `a`, B at `b`, C from `c`; the
/// operands' loads with L2 promotion `promotion`), with no CTAs assigned yet: what the plain GEMM and every fused op built on the engine share.
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
    promotion: L2Promotion,
) -> Result<(GemmParams, DeviceBuffer<TensorMap>)> {
    let (m, n, kk) = (shape.m as u64, shape.n as u64, shape.k as u64);
    let sw = |base, dims, row, box_dims| Tile2d { promotion, ..bf16_sw128(base, dims, row, box_dims) };
    let a_map = sw(a, [kk, m], 2 * kk, [TILE_K, TILE_M]);
    let b_map = match b_layout {
        BLayout::NK => sw(b, [kk, n], 2 * kk, [TILE_K, TILE_N]),
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
        b_layout: if b_layout == BLayout::KN { B_KN } else { B_NK },
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
    let GemmShape { n, k, .. } = shape;
    let arow: Vec<f64> = a[i * k..(i + 1) * k].iter().map(|x| x.to_f64()).collect();
    let mut out = vec![0.0f64; n];
    match layout {
        BLayout::KN => {
            for (kk, &av) in arow.iter().enumerate() {
                for (o, bv) in out.iter_mut().zip(&b[kk * n..(kk + 1) * n]) {
                    *o += av * bv.to_f64();
                }
            }
        }
        BLayout::NK => {
            for (j, o) in out.iter_mut().enumerate() {
                *o = b[j * k..(j + 1) * k].iter().zip(&arow).map(|(bv, av)| bv.to_f64() * av).sum();
            }
        }
    }
    out
}

// Keep the device's tile constants visible where the host sizes launches.
const _: () = assert!(k::THREADS == 384 && k::TILE_M == 128 && k::TILE_N == 256);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stream_k_takes_the_shapes_split_k_leaves() {
        let stream = |m, n, k| default_stream_k(GemmShape { m, n, k }, 132);
        // N = 28672, M <= 32: 112 tiles for 132 SMs.
        assert!(stream(1, 28672, 8192) && stream(16, 28672, 8192) && !stream(64, 28672, 8192));
        // Split-K's shapes, full waves and more, and too little K: not stream-K.
        assert!(!stream(64, 8192, 8192) && !stream(256, 28672, 8192) && !stream(8192, 8192, 8192));
        assert!(!stream(128, 28672, 128));
        for &(m, n, k) in &[(64usize, 8192usize, 8192usize), (1, 28672, 8192), (4096, 4096, 4096)] {
            // Never both.
            let shape = GemmShape { m, n, k };
            assert!(!(default_stream_k(shape, 132) && default_split_k(shape, 132) > 1), "{m}x{n}x{k}");
        }
    }

    #[test]
    fn split_k_fills_one_wave_when_tiles_are_few() {
        let split = |m, n, k| default_split_k(GemmShape { m, n, k }, 132);
        // One tile row of N = 8192: 32 tiles, four units each (128 CTAs busy).
        assert_eq!(split(64, 8192, 8192), 4);
        assert_eq!(split(1, 8192, 8192), 4);
        assert_eq!(split(256, 8192, 8192), 2);
        assert_eq!(split(64, 4096, 14336), 8);
        // Enough tiles (112 of 132 SMs, or more) or too few k-blocks: no split.
        assert_eq!(split(64, 28672, 8192), 1);
        assert_eq!(split(8192, 8192, 8192), 1);
        assert_eq!(split(64, 8192, 64), 1);
        assert_eq!(split(64, 8192, 512), 2);
        // Never more units than CTAs.
        for &(m, n, k) in &[(1usize, 8usize, 8usize), (64, 256, 1 << 20), (130, 2048, 4096), (1, 8, 1 << 16)] {
            let s = split(m, n, k);
            let tiles = (m.div_ceil(128) * n.div_ceil(256)) as u32;
            assert!((1..=MAX_SPLIT_K).contains(&s) && (s == 1 || tiles * s <= 132), "{m}x{n}x{k}: {s}");
        }
    }

    #[test]
    fn operand_elements_count_a_b_and_c_and_never_overflow() {
        assert_eq!(GemmShape { m: 2, n: 3, k: 4 }.operand_elements(), Some(8 + 12 + 6));
        assert_eq!(GemmShape { m: usize::MAX / 2, n: 4, k: 4 }.operand_elements(), None);
        assert_eq!(GemmShape { m: 1 << 40, n: 1 << 40, k: 1 }.operand_elements(), None);
    }
}
