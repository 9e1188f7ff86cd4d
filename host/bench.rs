//! The GEMM benchmark behind `mkernel bench gemm`: mkernel and cuBLAS on the same GPU, in the
//! same process, interleaved launch by launch; medians of CUDA-event timings.
use crate::abi::*;
use crate::baseline::Cublas;
use crate::comm::fifo::Fifo;
use crate::comm::proxy::{Proxy, ProxyConfig};
use crate::comm::transport::FnTransport;
use crate::gemm::{BLayout, Gemm, GemmOptions, GemmShape, Output};
use crate::gpu::{kernels, LaunchConfig};
use crate::testing::Rng;
use crate::{Gpu, Result};
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// One measured configuration.
#[derive(Clone, Debug)]
pub struct GemmBenchRow {
    pub shape: GemmShape,
    pub layout: BLayout,
    pub ours_ms: f64,
    pub cublas_ms: Option<f64>,
}

impl GemmBenchRow {
    pub fn ours_tflops(&self) -> f64 {
        self.shape.flops() / self.ours_ms / 1e9
    }
    pub fn cublas_tflops(&self) -> Option<f64> {
        self.cublas_ms.map(|t| self.shape.flops() / t / 1e9)
    }
    /// cuBLAS time over ours: above 1 means mkernel is faster.
    pub fn ratio(&self) -> Option<f64> {
        self.cublas_ms.map(|t| t / self.ours_ms)
    }
    pub fn json(&self, gpu: &str) -> String {
        let opt = |v: Option<f64>| v.map(|x| format!("{x:.5}")).unwrap_or_else(|| "null".into());
        format!(
            "{{\"op\":\"gemm\",\"gpu\":\"{gpu}\",\"m\":{},\"n\":{},\"k\":{},\"b_layout\":\"{:?}\",\"ours_ms\":{:.5},\"ours_tflops\":{:.2},\"cublas_ms\":{},\"cublas_tflops\":{},\"ratio_vs_cublas\":{}}}",
            self.shape.m, self.shape.n, self.shape.k, self.layout, self.ours_ms, self.ours_tflops(), opt(self.cublas_ms), opt(self.cublas_tflops()), opt(self.ratio())
        )
    }
}

/// Median of samples (the upper one of the middle pair).
pub fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

/// Time one shape and layout: `warmup` launches each, then `reps` interleaved samples of each.
pub fn bench_gemm(
    gpu: &Gpu,
    cublas: Option<&Cublas>,
    shape: GemmShape,
    layout: BLayout,
    reps: usize,
    warmup: usize,
) -> Result<GemmBenchRow> {
    let mut rng = Rng::new(0x5eed ^ (shape.m * 31 + shape.n * 17 + shape.k) as u64);
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k))?;
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n))?;
    let c = gpu.alloc::<half::bf16>(shape.m * shape.n)?;
    let gemm = Gemm::new(gpu, shape, layout, &a, &b, Output::Bf16(&c), GemmOptions::default())?;
    let cublas_call = |cb: &Cublas| {
        cb.gemm(shape, layout, &a, &b, &c).map_err(|e| crate::Error::InvalidArgument { arg: "cublas", rule: e })
    };
    for _ in 0..warmup {
        gemm.launch(gpu)?;
        if let Some(cb) = cublas {
            cublas_call(cb)?;
        }
    }
    gpu.synchronize()?;
    let (mut ours, mut theirs) = (Vec::new(), Vec::new());
    for _ in 0..reps {
        ours.push(gpu.time_ms(|| {
            gemm.launch(gpu).map_err(|e| match e {
                crate::Error::Gpu(g) => g,
                other => crate::gpu::GpuError::Module(other.to_string()),
            })
        })? as f64);
        if let Some(cb) = cublas {
            theirs
                .push(gpu.time_ms(|| cb.gemm(shape, layout, &a, &b, &c).map_err(crate::gpu::GpuError::Module))? as f64);
        }
    }
    gemm.check_diag()?;
    Ok(GemmBenchRow { shape, layout, ours_ms: median(ours), cublas_ms: cublas.map(|_| median(theirs)) })
}

/// One FIFO throughput configuration.
#[derive(Clone, Copy, Debug)]
pub struct FifoBench {
    pub blocks: u32,
    pub threads: u32,
    /// Commands each GPU thread pushes.
    pub per_thread: u32,
    /// Ring slots (power of two).
    pub capacity: u64,
    /// Check every command (exactly once, untorn, in per-thread order); off: only count them.
    pub verify: bool,
    pub max_batch: usize,
}

impl Default for FifoBench {
    fn default() -> Self {
        Self { blocks: 132, threads: 128, per_thread: 32, capacity: 4096, verify: true, max_batch: 32 }
    }
}

/// GPU threads push into one proxy thread; commands per second over the kernel's time. With
/// `verify`, an error unless every command arrived exactly once, untorn, in per-thread order.
pub fn fifo_throughput(gpu: &Gpu, cfg: FifoBench) -> crate::Result<f64> {
    let FifoBench { blocks, threads, per_thread: per, capacity, verify, max_batch } = cfg;
    let fifo = Arc::new(Fifo::new(gpu, capacity)?);
    let diag = gpu.mapped::<WaitDiag>(1)?;
    let total = blocks as u64 * threads as u64 * per as u64;
    let seen: Arc<Vec<AtomicU32>> = Arc::new((0..blocks * threads).map(|_| AtomicU32::new(0)).collect());
    let bad = Arc::new(AtomicU64::new(0));
    let (s2, b2) = (seen.clone(), bad.clone());
    let check = move |c: &FifoCmd| {
        let (_, id) = FifoCmd::split(c.src);
        let (t, i) = ((id >> 32) as u32, id as u32);
        let ok = c.op() == OP_WRITE
            && FifoCmd::split(c.dst).1 == !id & 0xffff_ffff_ffff
            && c.bytes == id ^ 0x5555_5555_5555_5555
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
    let proxy = Proxy::start(fifo.clone(), transport, ProxyConfig { max_batch, ..Default::default() });
    let p = FifoTestParams {
        fifo: fifo.params(),
        diag: diag.device_addr(),
        timeout_ns: 5_000_000_000,
        out: 0,
        reply_flag: 0,
        per_thread: per,
        mode: FIFO_TEST_THROUGHPUT,
    };
    // SAFETY: the FIFO, diagnostics block and proxy outlive the kernel (synchronised below).
    let ms =
        gpu.time_ms(|| unsafe { gpu.launch(kernels::FIFO_PUSH_TEST, &LaunchConfig::linear(blocks, threads, 0), &p) })?;
    gpu.synchronize()?;
    let start = std::time::Instant::now();
    while proxy.stats().commands < total && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let stats = proxy.shutdown()?;
    crate::error::check_diag(&diag)?;
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
    let diag = gpu.mapped::<WaitDiag>(1)?;
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
    );
    let p = FifoTestParams {
        fifo: fifo.params(),
        diag: diag.device_addr(),
        timeout_ns: 5_000_000_000,
        out: out.addr(),
        reply_flag: reply.device_addr(),
        per_thread: rounds,
        mode: FIFO_TEST_PINGPONG,
    };
    // SAFETY: as above.
    unsafe { gpu.launch(kernels::FIFO_PUSH_TEST, &LaunchConfig::linear(1, 32, 0), &p)? };
    gpu.synchronize()?;
    proxy.shutdown()?;
    crate::error::check_diag(&diag)?;
    Ok(out.to_vec()?)
}

/// The default throughput configuration (verified) and `rounds` round trips.
pub fn fifo_run(gpu: &Gpu, blocks: u32, threads: u32, per: u32, rounds: u32) -> crate::Result<(f64, Vec<u64>)> {
    let rate = fifo_throughput(gpu, FifoBench { blocks, threads, per_thread: per, ..Default::default() })?;
    Ok((rate, fifo_roundtrips(gpu, rounds)?))
}
