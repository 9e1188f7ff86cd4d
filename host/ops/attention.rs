//! Flash-attention forward on one GPU: `O = softmax(scale * Q K^T + mask) V` for every (batch,
//! query head), plus the log-sum-exp of each query row (what a backward pass and a ring's merge
//! need). bf16 in and out, fp32 softmax and accumulation; head dimension 64 or 128; grouped-query
//! attention (query head `h` reads key/value head `h / (heads / heads_kv)`); causal or not;
//! sequences of any length (edge blocks are masked, never padded by the caller).
//!
//! ```no_run
//! # fn main() -> Result<(), mkernel::Error> {
//! use mkernel::attention::{Attention, AttentionOptions, AttentionShape, AttnLayout};
//! use half::bf16;
//! let gpu = mkernel::Gpu::new(0)?;
//! let shape = AttentionShape { batch: 1, heads: 16, heads_kv: 16, seq_q: 4096, seq_k: 4096, head_dim: 128 };
//! let q = gpu.upload(&vec![bf16::ONE; shape.q_elements()])?;
//! let k = gpu.upload(&vec![bf16::ONE; shape.kv_elements()])?;
//! let v = gpu.upload(&vec![bf16::ONE; shape.kv_elements()])?;
//! let o = gpu.alloc::<bf16>(shape.q_elements())?;
//! let opts = AttentionOptions { causal: true, ..Default::default() };
//! let attn = Attention::new(&gpu, shape, AttnLayout::Bhsd, (&q, &k, &v), &o, None, opts)?;
//! attn.run(&gpu)?;
//! # Ok(()) }
//! ```
use crate::abi::{AttnParams, SeqPos, ATTN_BHSD, ATTN_BSHD};
use crate::error::{invalid, need_len, DiagBuffers, Result};
use crate::gpu::{kernels, DeviceBuffer, Gpu, LaunchConfig, Swizzle, TensorMap, Tile4d, TmaDtype};
use half::bf16;
use mkernel_device::kernels_info::attention as k;
use std::marker::PhantomData;
use std::time::Duration;

pub use mkernel_device::kernels_info::attention::{block_m, consumers, threads, BLOCK_N};

/// How Q, K, V and O are laid out (all four alike).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AttnLayout {
    /// `[batch, seq, heads, head_dim]`: a projection's output before any transpose.
    Bshd,
    /// `[batch, heads, seq, head_dim]`: torch SDPA's layout.
    Bhsd,
}

/// Problem size.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AttentionShape {
    /// Batch entries.
    pub batch: usize,
    /// Query (and output) heads.
    pub heads: usize,
    /// Key/value heads: divides `heads` (equal: multi-head attention; fewer: grouped-query).
    pub heads_kv: usize,
    /// Query rows per head.
    pub seq_q: usize,
    /// Key/value rows per head.
    pub seq_k: usize,
    /// Elements per head: 64 or 128.
    pub head_dim: usize,
}

impl AttentionShape {
    /// Elements of Q (and of O).
    pub fn q_elements(&self) -> usize {
        // Saturating: a product past usize fails the length checks instead of wrapping to a small one.
        self.batch.saturating_mul(self.seq_q).saturating_mul(self.heads).saturating_mul(self.head_dim)
    }

    /// Elements of K (and of V).
    pub fn kv_elements(&self) -> usize {
        self.batch.saturating_mul(self.seq_k).saturating_mul(self.heads_kv).saturating_mul(self.head_dim)
    }

    /// Elements of the log-sum-exp, `[batch, heads, seq_q]`.
    pub fn lse_elements(&self) -> usize {
        self.batch.saturating_mul(self.heads).saturating_mul(self.seq_q)
    }

    /// Query rows per tile: [`block_m`] of the head dimension (128 at D = 128, 192 at 64).
    pub fn block_m(&self) -> usize {
        block_m(self.head_dim as u32) as usize
    }

    /// Units of work (query tiles) of one pass over the keys (below 2^32 once [`validate`]d).
    ///
    /// [`validate`]: AttentionShape::validate
    pub fn tiles(&self) -> u32 {
        self.tile_count() as u32
    }

    /// The query tiles, counted without overflow (what [`AttentionShape::validate`] bounds).
    fn tile_count(&self) -> u128 {
        self.seq_q.div_ceil(self.block_m()) as u128 * self.heads as u128 * self.batch as u128
    }

    /// Floating-point operations as attention benchmarks count them (torch's, FlashAttention's):
    /// `4 b h s_q s_k d`, halved under a causal mask.
    pub fn flops(&self, causal: bool) -> f64 {
        let f = 4.0 * (self.batch * self.heads) as f64 * self.seq_q as f64 * self.seq_k as f64 * self.head_dim as f64;
        if causal {
            f / 2.0
        } else {
            f
        }
    }

    /// Check the shape against the kernel's rules, naming the one broken.
    pub fn validate(&self) -> Result<()> {
        for (arg, v) in [
            ("batch", self.batch),
            ("heads", self.heads),
            ("heads_kv", self.heads_kv),
            ("seq_q", self.seq_q),
            ("seq_k", self.seq_k),
        ] {
            if v == 0 {
                return Err(invalid(arg, "must be at least 1"));
            }
            if v > i32::MAX as usize {
                return Err(invalid(arg, format!("{v} exceeds 2^31 - 1 (TMA coordinates are 32-bit)")));
            }
        }
        if self.head_dim != 64 && self.head_dim != 128 {
            return Err(invalid("head_dim", format!("{} is not supported: the kernel takes 64 or 128", self.head_dim)));
        }
        if !self.heads.is_multiple_of(self.heads_kv) {
            return Err(invalid(
                "heads_kv",
                format!(
                    "{} does not divide heads = {}: each key/value head serves a whole group",
                    self.heads_kv, self.heads
                ),
            ));
        }
        let tiles = self.tile_count();
        if tiles > u32::MAX as u128 || self.lse_elements() as u128 > (1u128 << 62) {
            return Err(invalid("batch", format!("{self:?} has {tiles} query tiles; at most 2^32 - 1")));
        }
        Ok(())
    }
}

/// Options of one attention op.
#[derive(Clone, Copy, Debug)]
pub struct AttentionOptions {
    /// Mask keys after the query's own position (top-left aligned: query `i` sees keys `0..=i`,
    /// as torch's `is_causal`).
    pub causal: bool,
    /// Softmax scale (default `1 / sqrt(head_dim)`).
    pub scale: Option<f32>,
    /// Persistent CTAs (default: one per SM, at most one per tile).
    pub ctas: Option<u32>,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for AttentionOptions {
    fn default() -> Self {
        Self { causal: false, scale: None, ctas: None, timeout: Duration::from_secs(10) }
    }
}

/// An attention forward bound to its buffers: tensor maps encoded once, launched many times.
pub struct Attention<'a> {
    shape: AttentionShape,
    params: AttnParams,
    ctas: u32,
    kernel: kernels::Kernel<AttnParams>,
    _maps: DeviceBuffer<TensorMap>,
    _sched: DeviceBuffer<u64>,
    diag: DiagBuffers,
    _bufs: PhantomData<&'a ()>,
}

impl<'a> Attention<'a> {
    /// Validate, encode the tensor maps and prepare the launch. `lse`, when given, receives the
    /// natural-log log-sum-exp `[batch, heads, seq_q]` (f32). Nothing runs yet.
    pub fn new(
        gpu: &Gpu,
        shape: AttentionShape,
        layout: AttnLayout,
        (q, k, v): (&'a DeviceBuffer<bf16>, &'a DeviceBuffer<bf16>, &'a DeviceBuffer<bf16>),
        o: &'a DeviceBuffer<bf16>,
        lse: Option<&'a DeviceBuffer<f32>>,
        opts: AttentionOptions,
    ) -> Result<Self> {
        shape.validate()?;
        need_len("q", q.len(), shape.q_elements())?;
        need_len("k", k.len(), shape.kv_elements())?;
        need_len("v", v.len(), shape.kv_elements())?;
        need_len("o", o.len(), shape.q_elements())?;
        if let Some(l) = lse {
            need_len("lse", l.len(), shape.lse_elements())?;
        }
        let scale = resolve_scale(opts.scale, shape.head_dim)?;
        if opts.ctas == Some(0) {
            return Err(invalid("ctas", "must be at least 1"));
        }
        let ctas = opts.ctas.unwrap_or(gpu.info().sm_count).min(shape.tiles());
        let maps = gpu.upload_tensor_maps(&[
            tensor_map(q.addr(), shape, Side::Q, layout),
            tensor_map(k.addr(), shape, Side::Kv, layout),
            tensor_map(v.addr(), shape, Side::Kv, layout),
            tensor_map(o.addr(), shape, Side::O, layout),
        ])?;
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let sched = gpu.upload(&[0u64; 2])?;
        let mut params = base_params(shape, layout, (opts.causal, scale, opts.timeout), &diag, sched.addr());
        (params.q_map, params.k_map, params.v_map, params.o_map) =
            (maps.addr(), maps.addr() + 128, maps.addr() + 256, maps.addr() + 384);
        params.lse = lse.map_or(0, |l| l.addr());
        let kernel = if shape.head_dim == 64 { kernels::ATTENTION_D64 } else { kernels::ATTENTION_D128 };
        Ok(Self { shape, params, ctas, kernel, _maps: maps, _sched: sched, diag, _bufs: PhantomData })
    }

    /// The shape.
    pub fn shape(&self) -> AttentionShape {
        self.shape
    }

    /// Persistent CTAs launched.
    pub fn ctas(&self) -> u32 {
        self.ctas
    }

    /// Enqueue one forward on `gpu`'s stream (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        let d = self.shape.head_dim as u32;
        let cfg = LaunchConfig::linear(self.ctas, threads(d), k::smem_bytes(d));
        // SAFETY: the tensor maps and diagnostics are owned by self, the buffers borrowed for 'a
        // and checked against the shape above; they outlive the launch as long as the caller
        // synchronises before dropping them (run() does).
        unsafe { gpu.launch(self.kernel, &cfg, &self.params)? };
        Ok(())
    }

    /// Launch, wait, and turn a device-side timeout into [`crate::Error::DeviceTimeout`].
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.diag.wait(gpu, "attention", || Ok(()))
    }
}

/// Which tensor a map describes: its rows per head, heads, and box rows.
#[derive(Clone, Copy)]
pub(crate) enum Side {
    /// Q: `seq_q` rows of `heads` heads, loaded a tile ([`block_m`] rows) at a time.
    Q,
    /// K or V: `seq_k` rows of `heads_kv` heads, loaded 128 rows at a time.
    Kv,
    /// O: as Q, stored 64 rows (one consumer warpgroup's) at a time.
    O,
}

/// The rank-4 tensor map of a `[batch, seq, heads, D]` or `[batch, heads, seq, D]` bf16 tensor,
/// dimensions ordered as memory holds them (innermost first), boxes of 64 elements x some rows
/// of one head, 128-byte swizzle (what the kernel's `Geometry::coords` addresses).
pub(crate) fn tensor_map(base: u64, s: AttentionShape, side: Side, layout: AttnLayout) -> Tile4d {
    let (seq, heads, rows) = match side {
        Side::Q => (s.seq_q, s.heads, s.block_m() as u32),
        Side::Kv => (s.seq_k, s.heads_kv, BLOCK_N),
        Side::O => (s.seq_q, s.heads, 64),
    };
    let (d, seq, heads, batch) = (s.head_dim as u64, seq as u64, heads as u64, s.batch as u64);
    let (dims, strides, box_dims) = match layout {
        AttnLayout::Bshd => ([d, heads, seq, batch], [2 * d, 2 * d * heads, 2 * d * heads * seq], [64, 1, rows, 1]),
        AttnLayout::Bhsd => ([d, seq, heads, batch], [2 * d, 2 * d * seq, 2 * d * seq * heads], [64, rows, 1, 1]),
    };
    Tile4d { base, dtype: TmaDtype::Bf16, dims, strides_bytes: strides, box_dims, swizzle: Swizzle::B128 }
}

/// The softmax scale: the caller's, or `1 / sqrt(head_dim)`; finite and non-zero.
pub(crate) fn resolve_scale(scale: Option<f32>, head_dim: usize) -> Result<f32> {
    let scale = scale.unwrap_or(1.0 / (head_dim as f32).sqrt());
    if !scale.is_finite() || scale == 0.0 {
        return Err(invalid("scale", format!("{scale} must be finite and non-zero")));
    }
    Ok(scale)
}

/// The parameter block's shape, mask and bookkeeping fields; the caller fills in the tensor maps,
/// the log-sum-exp, and (a ring) positions and running output.
pub(crate) fn base_params(
    shape: AttentionShape,
    layout: AttnLayout,
    (causal, scale, timeout): (bool, f32, Duration),
    diag: &DiagBuffers,
    sched: u64,
) -> AttnParams {
    AttnParams {
        diag: diag.abi(),
        timeout_ns: timeout.as_nanos().min(u64::MAX as u128) as u64,
        batch: shape.batch as u32,
        heads: shape.heads as u32,
        heads_kv: shape.heads_kv as u32,
        seq_q: shape.seq_q as u32,
        seq_k: shape.seq_k as u32,
        layout: if layout == AttnLayout::Bshd { ATTN_BSHD } else { ATTN_BHSD },
        causal: causal as u32,
        scale_log2: scale * std::f32::consts::LOG2_E,
        q_pos: SeqPos::IDENTITY,
        k_pos: SeqPos::IDENTITY,
        sched,
        ..Default::default()
    }
}

/// Index of element `e` of row `row` of head `h` of batch entry `b` in a tensor of `seq` rows and
/// `heads` heads of `d` elements laid out as `layout`.
pub fn index(
    layout: AttnLayout,
    (batch_idx, h, row, e): (usize, usize, usize, usize),
    seq: usize,
    heads: usize,
    d: usize,
) -> usize {
    match layout {
        AttnLayout::Bshd => ((batch_idx * seq + row) * heads + h) * d + e,
        AttnLayout::Bhsd => ((batch_idx * heads + h) * seq + row) * d + e,
    }
}

/// The reference for query row `row` of head `h` of batch entry `b`, in f64 from the bf16
/// inputs: the output row and the log-sum-exp. A row that sees no key gives zeros and `-inf`.
#[allow(clippy::too_many_arguments)]
pub fn reference_row(
    (q, k, v): (&[bf16], &[bf16], &[bf16]),
    s: AttentionShape,
    layout: AttnLayout,
    causal: bool,
    scale: f64,
    (b, h, row): (usize, usize, usize),
) -> (Vec<f64>, f64) {
    let d = s.head_dim;
    let hk = h / (s.heads / s.heads_kv);
    let qrow: Vec<f64> = (0..d).map(|e| q[index(layout, (b, h, row, e), s.seq_q, s.heads, d)].to_f64()).collect();
    let visible = if causal { (row + 1).min(s.seq_k) } else { s.seq_k };
    let scores: Vec<f64> = (0..visible)
        .map(|j| {
            let dot: f64 =
                (0..d).map(|e| qrow[e] * k[index(layout, (b, hk, j, e), s.seq_k, s.heads_kv, d)].to_f64()).sum();
            dot * scale
        })
        .collect();
    if scores.is_empty() {
        return (vec![0.0; d], f64::NEG_INFINITY);
    }
    let max = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let weights: Vec<f64> = scores.iter().map(|x| (x - max).exp()).collect();
    let sum: f64 = weights.iter().sum();
    let mut out = vec![0.0; d];
    for (j, w) in weights.iter().enumerate() {
        for (e, o) in out.iter_mut().enumerate() {
            *o += w * v[index(layout, (b, hk, j, e), s.seq_k, s.heads_kv, d)].to_f64();
        }
    }
    out.iter_mut().for_each(|o| *o /= sum);
    (out, max + sum.ln())
}

// Keep the device's tile constants visible where the host sizes launches.
const _: () = assert!(k::block_m(128) == 128 && k::block_m(64) == 192 && k::BLOCK_N == 128);

#[cfg(test)]
mod tests {
    use super::*;

    fn shape() -> AttentionShape {
        AttentionShape { batch: 2, heads: 8, heads_kv: 2, seq_q: 300, seq_k: 300, head_dim: 128 }
    }

    #[test]
    fn validate_names_the_argument() {
        let bad = |s: AttentionShape, arg: &str| {
            let e = s.validate().unwrap_err().to_string();
            assert!(e.contains(arg), "{e} should name {arg}");
        };
        bad(AttentionShape { head_dim: 96, ..shape() }, "head_dim");
        bad(AttentionShape { heads_kv: 3, ..shape() }, "heads_kv");
        bad(AttentionShape { seq_k: 0, ..shape() }, "seq_k");
        bad(AttentionShape { batch: 0, ..shape() }, "batch");
        shape().validate().unwrap();
        // Element counts past usize saturate (no wrap to a small count that a short buffer meets).
        let huge = AttentionShape { batch: i32::MAX as usize, seq_q: i32::MAX as usize, heads: 8, ..shape() };
        assert_eq!(huge.q_elements(), usize::MAX);
        bad(huge, "batch");
    }

    #[test]
    fn layouts_index_every_element_once() {
        let (b, s, h, d) = (2, 3, 4, 8);
        for layout in [AttnLayout::Bshd, AttnLayout::Bhsd] {
            let mut seen = vec![false; b * s * h * d];
            for bi in 0..b {
                for hi in 0..h {
                    for r in 0..s {
                        for e in 0..d {
                            let i = index(layout, (bi, hi, r, e), s, h, d);
                            assert!(!seen[i]);
                            seen[i] = true;
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn flops_halve_under_a_causal_mask() {
        let s = AttentionShape { batch: 4, heads: 16, heads_kv: 16, seq_q: 8192, seq_k: 8192, head_dim: 128 };
        assert_eq!(s.flops(false), 4.0 * 64.0 * 8192.0 * 8192.0 * 128.0);
        assert_eq!(s.flops(true), s.flops(false) / 2.0);
    }
}
