//! `mkernel`: what GPUs are here and whether mkernel works on them (`info`), and benchmarks
//! beside their baselines (`bench gemm`).
use mkernel::bench::{bench_gemm, GemmBenchRow};
use mkernel::gemm::{BLayout, Gemm, GemmOptions, GemmShape, Output};
use mkernel::gpu::{self, Gpu};
use mkernel::testing::Rng;
use std::process::ExitCode;

mod comm_cmds;

const USAGE: &str = "usage:
  mkernel info                      GPUs found, PTX module, a quick self-check
  mkernel bench gemm [--shapes MxNxK,...] [--layouts nk,kn] [--reps N] [--json FILE]
                                    mkernel GEMM vs cuBLAS, same GPU, interleaved
  mkernel bench fifo [--blocks B] [--per-thread K] [--rounds R]
                                    GPU->CPU command FIFO: commands/s and round-trip latency
  mkernel launch -n N [--nodes K] [--gpus a,b,..] [--timeout-s T] -- PROGRAM ARGS..
                                    one process per rank (torchrun-style variables), fail-fast
  mkernel bench allgather [--sizes B,..] [--reps R] [--intra-ctas C] [--json FILE]   (as a rank)
  mkernel rank-check bootstrap|allgather [...]                                       (as a rank)";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let r = match args.first().map(String::as_str) {
        Some("info") | None => info(),
        Some("bench") if args.get(1).map(String::as_str) == Some("gemm") => bench(&args[2..]),
        Some("bench") if args.get(1).map(String::as_str) == Some("allgather") => {
            comm_cmds::cmd_bench_allgather(&args[2..])
        }
        Some("bench") if args.get(1).map(String::as_str) == Some("fifo") => comm_cmds::cmd_bench_fifo(&args[2..]),
        Some("launch") => comm_cmds::cmd_launch(&args[1..]),
        Some("rank-check") => comm_cmds::cmd_rank_check(&args[1..]),
        _ => {
            eprintln!("{USAGE}");
            return ExitCode::from(2);
        }
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mkernel: {e}");
            ExitCode::FAILURE
        }
    }
}

fn info() -> Result<(), String> {
    let n = gpu::device_count().map_err(|e| e.to_string())?;
    println!(
        "mkernel {}: PTX module {} bytes, {} kernels, target sm_90a",
        env!("CARGO_PKG_VERSION"),
        gpu::kernels::PTX.len(),
        gpu::kernels::ALL.len()
    );
    if n == 0 {
        println!("no CUDA device found (no NVIDIA driver or no GPU here): nothing to check");
        return Ok(());
    }
    for i in 0..n {
        let g = Gpu::new(i).map_err(|e| format!("GPU {i}: {e}"))?;
        let d = g.info();
        println!(
            "GPU {i}: {} sm_{}{} {} SMs, {:.1} GiB, L2 {} MiB, {} KiB smem/block, driver {}.{}; PTX loaded in {:.0} ms",
            d.name,
            d.compute_capability.0,
            d.compute_capability.1,
            d.sm_count,
            d.total_memory as f64 / (1u64 << 30) as f64,
            d.l2_bytes >> 20,
            d.max_smem_per_block >> 10,
            d.driver_version / 1000,
            d.driver_version % 1000 / 10,
            d.module_load.as_secs_f64() * 1e3
        );
        if d.compute_capability != (9, 0) {
            println!("  not a Hopper GPU: mkernel's kernels need sm_90a");
            continue;
        }
        print!("  self-check (GEMM 1000x1544x4104 vs host reference, both B layouts): ");
        for layout in [BLayout::NK, BLayout::KN] {
            let err = self_check(&g, layout).map_err(|e| e.to_string())?;
            if err > 4e-3 {
                println!("FAILED ({layout:?}: rel err {err:.2e})");
                return Err("self-check failed".into());
            }
            print!("{layout:?} ok ({err:.1e}) ");
        }
        println!();
    }
    Ok(())
}

fn self_check(g: &Gpu, layout: BLayout) -> mkernel::Result<f64> {
    let shape = GemmShape { m: 1000, n: 1544, k: 4104 };
    let mut rng = Rng::new(7);
    let (a, b) = (rng.bf16_vec(shape.m * shape.k), rng.bf16_vec(shape.k * shape.n));
    let (da, db) = (g.upload(&a)?, g.upload(&b)?);
    let dc = g.alloc::<half::bf16>(shape.m * shape.n)?;
    dc.fill_bytes(0xff)?;
    Gemm::new(g, shape, layout, &da, &db, Output::Bf16(&dc), GemmOptions::default())?.run(g)?;
    let mut worst = 0f64;
    for i in [0, 1, 499, 998, 999] {
        let got: Vec<f64> = dc.slice(i * shape.n..(i + 1) * shape.n).to_vec()?.iter().map(|x| x.to_f64()).collect();
        let want = mkernel::gemm::reference_row(&a, &b, shape, layout, i);
        worst = worst.max(mkernel::testing::rel_err(&got, &want));
    }
    Ok(worst)
}

fn bench(args: &[String]) -> Result<(), String> {
    let mut shapes = "8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048".to_string();
    let mut layouts = vec![BLayout::NK, BLayout::KN];
    let (mut reps, mut json) = (20usize, None::<String>);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        let mut val = || it.next().cloned().ok_or(format!("{a} needs a value"));
        match a.as_str() {
            "--shapes" => shapes = val()?,
            "--reps" => reps = val()?.parse().map_err(|e| format!("--reps: {e}"))?,
            "--json" => json = Some(val()?),
            "--layouts" => {
                layouts = val()?
                    .split(',')
                    .map(|l| match l {
                        "nk" => Ok(BLayout::NK),
                        "kn" => Ok(BLayout::KN),
                        o => Err(format!("--layouts: unknown layout {o} (nk or kn)")),
                    })
                    .collect::<Result<_, _>>()?
            }
            o => return Err(format!("unknown option {o}\n{USAGE}")),
        }
    }
    let shapes: Vec<GemmShape> = shapes
        .split(',')
        .map(|s| {
            let v: Vec<usize> =
                s.split('x').map(|x| x.parse().map_err(|_| format!("bad shape {s}"))).collect::<Result<_, _>>()?;
            match v[..] {
                [m, n, k] => Ok(GemmShape { m, n, k }),
                _ => Err(format!("bad shape {s}: want MxNxK")),
            }
        })
        .collect::<Result<_, _>>()?;
    let g = Gpu::new(0).map_err(|e| e.to_string())?;
    let cublas = match mkernel::baseline::Cublas::new(&g) {
        Ok(c) => {
            eprintln!("cuBLAS: {}", c.path);
            Some(c)
        }
        Err(e) => {
            eprintln!("cuBLAS unavailable, timing mkernel alone: {e}");
            None
        }
    };
    let gpu_name = g.info().name.clone();
    let mut rows: Vec<GemmBenchRow> = Vec::new();
    for &s in &shapes {
        for &l in &layouts {
            let r = bench_gemm(&g, cublas.as_ref(), s, l, reps, 5).map_err(|e| e.to_string())?;
            eprintln!("{}", r.json(&gpu_name));
            rows.push(r);
        }
    }
    if let Some(path) = json {
        let text: String = rows.iter().map(|r| r.json(&gpu_name) + "\n").collect();
        std::fs::write(&path, text).map_err(|e| format!("{path}: {e}"))?;
    }
    println!("GEMM bf16 -> bf16 on {gpu_name}, median of {reps} interleaved launches (CUDA events)");
    println!(
        "{:<22} {:>3} {:>10} {:>9} {:>10} {:>9} {:>7}",
        "shape MxNxK", "B", "ours ms", "TFLOP/s", "cuBLAS ms", "TFLOP/s", "ratio"
    );
    for r in &rows {
        let opt = |v: Option<f64>, p: usize| v.map(|x| format!("{x:.p$}")).unwrap_or_else(|| "-".into());
        println!(
            "{:<22} {:>3} {:>10.3} {:>9.1} {:>10} {:>9} {:>7}",
            format!("{}x{}x{}", r.shape.m, r.shape.n, r.shape.k),
            format!("{:?}", r.layout),
            r.ours_ms,
            r.ours_tflops(),
            opt(r.cublas_ms, 3),
            opt(r.cublas_tflops(), 1),
            opt(r.ratio(), 3)
        );
    }
    Ok(())
}
