//! The persistent Hopper GEMM: `C = A @ B` in bf16 with fp32 accumulation, checked against a
//! host reference on a few rows.
//!
//! `cargo run --release --example gemm` (prints a skip message where no Hopper GPU is present).
use half::bf16;
use mkernel::gemm::{reference_row, BLayout, Gemm, GemmOptions, GemmShape, Output};
use mkernel::testing::{gpu_or_skip, rel_err, Rng};

fn main() -> Result<(), mkernel::Error> {
    let Some(gpu) = gpu_or_skip("example gemm") else { return Ok(()) };
    // Any M; N and K multiples of 8 (TMA rows are 16-byte aligned).
    let shape = GemmShape { m: 4000, n: 2048, k: 4096 };
    let mut rng = Rng::new(1);
    let a_host = rng.bf16_vec(shape.m * shape.k); // [m, k] row-major
    let w_host = rng.bf16_vec(shape.n * shape.k); // [n, k]: a torch Linear weight
    let (a, w) = (gpu.upload(&a_host)?, gpu.upload(&w_host)?);
    let c = gpu.alloc::<bf16>(shape.m * shape.n)?;

    // Validate (typed errors name the argument and the rule) and encode the tensor maps once...
    let gemm = Gemm::new(&gpu, shape, BLayout::NK, &a, &w, Output::Bf16(&c), GemmOptions::default())?;
    // ...then launch as often as needed; run() also waits and reports a device-side timeout.
    gemm.run(&gpu)?;
    let ms = gpu.time_ms(|| gemm.launch(&gpu).map_err(|e| mkernel::GpuError::Module(e.to_string())))?;

    let row = 1234;
    let got: Vec<f64> = c.slice(row * shape.n..(row + 1) * shape.n).to_vec()?.iter().map(|x| x.to_f64()).collect();
    let want = reference_row(&a_host, &w_host, shape, BLayout::NK, row);
    println!(
        "gemm {}x{}x{}: {:.3} ms, {:.0} TFLOP/s; row {row} rel err {:.1e}",
        shape.m,
        shape.n,
        shape.k,
        ms,
        shape.flops() / ms as f64 / 1e9,
        rel_err(&got, &want)
    );
    Ok(())
}
