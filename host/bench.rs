//! The GEMM benchmark behind `mkernel bench gemm`: mkernel and cuBLAS on the same GPU, in the
//! same process, interleaved launch by launch; medians of CUDA-event timings.
use crate::baseline::Cublas;
use crate::gemm::{BLayout, Gemm, GemmOptions, GemmShape, Output};
use crate::testing::Rng;
use crate::{Gpu, Result};

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

fn median(mut v: Vec<f64>) -> f64 {
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
