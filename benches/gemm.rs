//! Criterion bench: mkernel's GEMM beside cuBLAS on the same GPU, timed with CUDA events around
//! each batch of launches. Without a Hopper GPU it says so and measures nothing.
//! `cargo bench --bench gemm`; shapes via MKERNEL_BENCH_SHAPES=MxNxK,...
use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use half::bf16;
use mkernel::baseline::Cublas;
use mkernel::gemm::{BLayout, Gemm, GemmOptions, GemmShape, Output};
use mkernel::testing::{gpu_or_skip, Rng};
use std::time::Duration;

fn shapes() -> Vec<GemmShape> {
    let spec = std::env::var("MKERNEL_BENCH_SHAPES")
        .unwrap_or_else(|_| "8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048".into());
    spec.split(',')
        .map(|s| {
            let v: Vec<usize> = s.split('x').map(|x| x.parse().expect("MKERNEL_BENCH_SHAPES: MxNxK,...")).collect();
            GemmShape { m: v[0], n: v[1], k: v[2] }
        })
        .collect()
}

fn gemm(c: &mut Criterion) {
    let Some(gpu) = gpu_or_skip("bench gemm") else { return };
    let cublas = Cublas::new(&gpu).map_err(|e| eprintln!("cuBLAS unavailable: {e}")).ok();
    let mut group = c.benchmark_group("gemm_bf16");
    group.sample_size(10).warm_up_time(Duration::from_millis(500)).measurement_time(Duration::from_secs(2));
    let mut rng = Rng::new(42);
    for shape in shapes() {
        for layout in [BLayout::NK, BLayout::KN] {
            let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
            let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
            let out = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
            let g = Gemm::new(&gpu, shape, layout, &a, &b, Output::Bf16(&out), GemmOptions::default()).unwrap();
            let id = format!("{}x{}x{}/{layout:?}", shape.m, shape.n, shape.k);
            group.throughput(Throughput::Elements(shape.flops() as u64));
            group.bench_function(BenchmarkId::new("mkernel", &id), |bch| {
                bch.iter_custom(|iters| {
                    let ms = gpu.time_ms(|| {
                        for _ in 0..iters {
                            g.launch(&gpu).map_err(|e| mkernel::GpuError::Module(e.to_string()))?;
                        }
                        Ok(())
                    });
                    Duration::from_secs_f64(ms.unwrap() as f64 / 1e3)
                })
            });
            if let Some(cb) = &cublas {
                group.bench_function(BenchmarkId::new("cublas", &id), |bch| {
                    bch.iter_custom(|iters| {
                        let ms = gpu.time_ms(|| {
                            for _ in 0..iters {
                                cb.gemm(shape, layout, &a, &b, &out).map_err(mkernel::GpuError::Module)?;
                            }
                            Ok(())
                        });
                        Duration::from_secs_f64(ms.unwrap() as f64 / 1e3)
                    })
                });
            }
            g.check_diag().unwrap();
        }
    }
    group.finish();
}

criterion_group!(benches, gemm);
criterion_main!(benches);
