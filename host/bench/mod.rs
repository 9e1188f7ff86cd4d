//! Benchmarks behind `mkernel bench`: every op is timed by the one [`harness`] (warm-up, a
//! barrier before each iteration, CUDA-event medians per rank, the slowest rank's median) and
//! reported as [`Record`]s; this module holds the GEMM and FIFO benchmarks.
use crate::abi::*;
use crate::attention::{Attention, AttentionOptions, AttentionShape, AttnLayout};
use crate::baseline::Cublas;
use crate::comm::fifo::Fifo;
use crate::comm::proxy::{Proxy, ProxyConfig};
use crate::comm::transport::FnTransport;
use crate::gemm::{BLayout, GatherGemm, Gemm, GemmOptions, GemmShape, Output};
use crate::gpu::{kernels, LaunchConfig};
use crate::testing::Rng;
use crate::{Gpu, Result};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub mod device_barrier;
pub mod harness;
pub mod stream_wait;
pub mod timeline;
pub use device_barrier::RankGroup;
pub use harness::{median, print_table, time_each, time_ms, write_json, Group, Record, RunInfo, Solo, Timing};
pub use stream_wait::{peer_copies, stream_wait, Latencies, Reaction, StreamWaitProbe};

impl BLayout {
    /// The layout's name in records and on the command line (`nk`, `kn`).
    pub fn name(self) -> &'static str {
        match self {
            BLayout::NK => "nk",
            BLayout::KN => "kn",
        }
    }
}

impl GemmShape {
    /// `MxNxK`, the shape's name in records.
    pub fn label(&self) -> String {
        format!("{}x{}x{}", self.m, self.n, self.k)
    }
}

/// mkernel's GEMM and (when loaded) cuBLAS on the same fresh random inputs, interleaved launch by
/// launch: one record each.
pub fn bench_gemm(
    gpu: &Gpu,
    cublas: Option<&Cublas>,
    shape: GemmShape,
    layout: BLayout,
    opts: GemmOptions,
    gather: bool,
    timing: Timing,
) -> Result<Vec<Record>> {
    gpu.check_fits("shape", shape.operand_elements(), if gather { 3 } else { 2 })?;
    let mut rng = Rng::new(0x5eed ^ (shape.m * 31 + shape.n * 17 + shape.k) as u64);
    let source = rng.bf16_vec(shape.m * shape.k);
    // With `gather`: M rows of the source picked at random (with repeats); the GEMMs in order
    // multiply those rows laid out.
    let picks = gather.then(|| {
        let rows: Vec<u32> = (0..shape.m).map(|_| rng.next_u32() % shape.m as u32).collect();
        (crate::gemm::gather_rows(&source, &rows, shape.k), rows)
    });
    let a = gpu.upload(picks.as_ref().map_or(&source, |(picked, _)| picked))?;
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n))?;
    let c = gpu.alloc::<half::bf16>(shape.m * shape.n)?;
    let gemm = Gemm::new(gpu, shape, layout, &a, &b, Output::Bf16(&c), opts)?;
    let gather_bufs = match &picks {
        Some((_, rows)) => Some((gpu.upload(&source)?, gpu.upload(rows)?)),
        None => None,
    };
    let gathered = match &gather_bufs {
        Some((src, table)) => Some(GatherGemm::new(gpu, shape, layout, src, table, &b, Output::Bf16(&c), opts)?),
        None => None,
    };
    let mut ours = || gemm.launch(gpu);
    let mut theirs = || {
        let cb = cublas.expect("only timed when loaded");
        cb.gemm(shape, layout, &a, &b, &c).map_err(|e| crate::Error::Gpu(crate::gpu::GpuError::Module(e)))
    };
    let mut picking = || gathered.as_ref().map_or(Ok(()), |g| g.launch(gpu));
    let mut works: Vec<&mut dyn FnMut() -> Result<()>> = vec![&mut ours];
    let mut imps = vec!["mkernel"];
    if cublas.is_some() {
        works.push(&mut theirs);
        imps.push("cublas");
    }
    if gather {
        works.push(&mut picking);
        imps.push("gather");
    }
    let ms = time_each(gpu, &mut Solo, timing, &mut works)?;
    gemm.check_diag()?;
    if let Some(g) = &gathered {
        g.run(gpu)?; // a bad row or a device-side timeout, reported
    }
    let run = RunInfo::single(gpu);
    Ok(ms
        .iter()
        .zip(imps)
        .map(|(&t, imp)| {
            let r = run.record("gemm", shape.label(), layout.name(), imp, t).with_flops(shape.flops());
            if imp == "mkernel" {
                r.with("split_k", gemm.splits())
                    .with("stream_k", gemm.stream_k() as u32)
                    .with("tile_n", gemm.tile_n())
                    .with("ctas", gemm.ctas())
            } else {
                r
            }
        })
        .collect())
}

/// One FIFO throughput configuration.
#[derive(Clone, Copy, Debug)]
pub struct FifoBench {
    /// CTAs of the push kernel.
    pub blocks: u32,
    /// Threads per CTA; every thread is a producer.
    pub threads: u32,
    /// Commands each GPU thread pushes.
    pub per_thread: u32,
    /// Ring slots (power of two).
    pub capacity: u64,
    /// Check every command (exactly once, untorn, in per-thread order); off: only count them.
    pub verify: bool,
    /// Most commands the proxy hands the transport at once ([`ProxyConfig::max_batch`]).
    pub max_batch: usize,
}

impl Default for FifoBench {
    fn default() -> Self {
        Self { blocks: 132, threads: 128, per_thread: 32, capacity: 4096, verify: true, max_batch: 32 }
    }
}

/// How long the FIFO kernels' waits (for FIFO space, for the proxy's reply) last before they
/// give up.
const FIFO_TIMEOUT: Duration = Duration::from_secs(5);

/// GPU threads push into one proxy thread; commands per second over the kernel's time. With
/// `verify`, an error unless every command arrived exactly once, untorn, in per-thread order.
pub fn fifo_throughput(gpu: &Gpu, cfg: FifoBench) -> crate::Result<f64> {
    let FifoBench { blocks, threads, per_thread: per, capacity, verify, max_batch } = cfg;
    let fifo = Arc::new(Fifo::new(gpu, capacity)?);
    let diag = crate::DiagBuffers::new(gpu, FIFO_TIMEOUT)?;
    let total = blocks as u64 * threads as u64 * per as u64;
    let seen: Arc<Vec<AtomicU32>> = Arc::new((0..blocks * threads).map(|_| AtomicU32::new(0)).collect());
    let bad = Arc::new(AtomicU64::new(0));
    let (s2, b2) = (seen.clone(), bad.clone());
    let check = move |c: &FifoCmd| {
        let (_, id) = FifoCmd::split(c.src);
        let (t, i) = ((id >> 32) as u32, id as u32);
        let ok = c.op() == OP_WRITE
            && FifoCmd::split(c.dst).1 == !id & 0x7fff_ffff_ffff
            && c.bytes == (id ^ 0x5555_5555) & 0xffff_ffff
            && c.flag_value == id.rotate_left(17)
            && c.dst_rank() == t & 0xffff
            && (t as usize) < s2.len();
        // Each thread's commands arrive in its own order: index i must be the next one.
        if !ok || s2[t as usize].fetch_add(1, Ordering::Relaxed) != i {
            b2.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    };
    let transport: Box<dyn crate::comm::transport::Transport> =
        if verify { Box::new(FnTransport(check)) } else { Box::new(FnTransport(|_: &FifoCmd| Ok(()))) };
    let proxy = Proxy::start(fifo.clone(), transport, ProxyConfig { max_batch, ..Default::default() })?;
    let p = FifoTestParams {
        fifo: fifo.params(),
        diag: diag.abi(),
        timeout_ns: FIFO_TIMEOUT.as_nanos() as u64,
        out: 0,
        reply_flag: 0,
        per_thread: per,
        mode: FIFO_TEST_THROUGHPUT,
    };
    // SAFETY: the FIFO, diagnostics block and proxy outlive the kernel (synchronised below).
    let ms =
        gpu.time_ms(|| unsafe { gpu.launch(kernels::FIFO_PUSH_TEST, &LaunchConfig::linear(blocks, threads, 0), &p) })?;
    diag.wait(gpu, "fifo-bench", || Ok(()))?;
    let start = std::time::Instant::now();
    while proxy.stats().commands < total && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = proxy.shutdown()?;
    let wrong = bad.load(Ordering::Relaxed);
    let short = if verify { seen.iter().filter(|c| c.load(Ordering::Relaxed) != per).count() } else { 0 };
    if stats.commands != total || wrong != 0 || short != 0 {
        let rule = format!(
            "{} of {total} commands arrived, {wrong} wrong or out of order, {short} threads short",
            stats.commands
        );
        return Err(crate::Error::InvalidArgument { arg: "fifo", rule });
    }
    Ok(total as f64 / (ms as f64 / 1e3))
}

/// `rounds` GPU -> proxy -> GPU ping-pongs (push a SIGNAL, the proxy sets a host-mapped flag the
/// GPU polls); each round trip in ns.
pub fn fifo_roundtrips(gpu: &Gpu, rounds: u32) -> crate::Result<Vec<u64>> {
    let diag = crate::DiagBuffers::new(gpu, FIFO_TIMEOUT)?;
    let fifo = Arc::new(Fifo::new(gpu, 64)?);
    let reply = Arc::new(gpu.mapped::<u32>(1)?);
    let out = gpu.alloc::<u64>(rounds as usize)?;
    let r2 = reply.clone();
    let proxy = Proxy::start(
        fifo.clone(),
        Box::new(FnTransport(move |c: &FifoCmd| {
            r2.atomic(0).store(c.flag_value as u32, Ordering::Release);
            Ok(())
        })),
        ProxyConfig::default(),
    )?;
    let p = FifoTestParams {
        fifo: fifo.params(),
        diag: diag.abi(),
        timeout_ns: FIFO_TIMEOUT.as_nanos() as u64,
        out: out.addr(),
        reply_flag: reply.device_addr(),
        per_thread: rounds,
        mode: FIFO_TEST_PINGPONG,
    };
    // SAFETY: as above.
    unsafe { gpu.launch(kernels::FIFO_PUSH_TEST, &LaunchConfig::linear(1, 32, 0), &p)? };
    diag.wait(gpu, "fifo-bench", || Ok(()))?;
    proxy.shutdown()?;
    Ok(out.to_vec()?)
}

/// The default throughput configuration (verified) and `rounds` round trips.
pub fn fifo_run(gpu: &Gpu, blocks: u32, threads: u32, per: u32, rounds: u32) -> crate::Result<(f64, Vec<u64>)> {
    let rate = fifo_throughput(gpu, FifoBench { blocks, threads, per_thread: per, ..Default::default() })?;
    Ok((rate, fifo_roundtrips(gpu, rounds)?))
}

impl AttentionShape {
    /// `BxHxSxD` (`BxH/HkvxSqxSkxD` when heads or lengths differ), the shape's name in records.
    pub fn label(&self) -> String {
        if self.heads == self.heads_kv && self.seq_q == self.seq_k {
            format!("{}x{}x{}x{}", self.batch, self.heads, self.seq_q, self.head_dim)
        } else {
            format!("{}x{}/{}x{}x{}x{}", self.batch, self.heads, self.heads_kv, self.seq_q, self.seq_k, self.head_dim)
        }
    }
}

impl AttnLayout {
    /// The layout's name in records and on the command line (`bshd`, `bhsd`).
    pub fn name(self) -> &'static str {
        match self {
            AttnLayout::Bshd => "bshd",
            AttnLayout::Bhsd => "bhsd",
        }
    }
}

/// mkernel's attention forward (with the log-sum-exp, as a ring or a backward pass needs it) on
/// fresh random inputs: one record, TFLOP/s counted as torch and FlashAttention count them, on
/// `ctas` persistent CTAs (None: one per SM). cuDNN and FlashAttention-2 come from
/// `torch_baselines.py single` in the same call.
pub fn bench_attention(
    gpu: &Gpu,
    shape: AttentionShape,
    layout: AttnLayout,
    causal: bool,
    ctas: Option<u32>,
    timing: Timing,
) -> Result<Record> {
    let elems = shape.q_elements().checked_mul(2).and_then(|x| x.checked_add(2 * shape.kv_elements()));
    gpu.check_fits("configs", elems, 2)?;
    let mut rng = Rng::new(0xa77e ^ (shape.seq_q * 31 + shape.heads * 17 + shape.head_dim) as u64);
    let q = gpu.upload(&rng.bf16_vec(shape.q_elements()))?;
    let k = gpu.upload(&rng.bf16_vec(shape.kv_elements()))?;
    let v = gpu.upload(&rng.bf16_vec(shape.kv_elements()))?;
    let o = gpu.alloc::<half::bf16>(shape.q_elements())?;
    let lse = gpu.alloc::<f32>(shape.lse_elements())?;
    let opts = AttentionOptions { causal, ctas, ..Default::default() };
    let attn = Attention::new(gpu, shape, layout, (&q, &k, &v), &o, Some(&lse), opts)?;
    let ms = time_ms(gpu, &mut Solo, timing, || attn.launch(gpu))?;
    attn.run(gpu)?;
    let run = RunInfo::single(gpu);
    Ok(run
        .record(
            "attention",
            shape.label(),
            &format!("{}{}", layout.name(), if causal { "/causal" } else { "" }),
            "mkernel",
            ms,
        )
        .with_flops(shape.flops(causal))
        .with("causal", causal)
        .with("ctas", attn.ctas()))
}
