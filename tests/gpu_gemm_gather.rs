//! The gathered GEMM `C[i] = A[rows[i]] @ B` on the GPU: bit for bit against the plain GEMM (the
//! same engine and tiles) on the rows laid out in order by the host, and within the bf16 contract
//! of an f64 host reference on sampled rows; random row tables with repeats and padding entries
//! (`u32::MAX`: rows of zeros), ragged shapes (M not a multiple of 128, K not a multiple of 64,
//! few columns), both B layouts, bf16 and f32 output, poisoned outputs, launches back to back;
//! an index past A reported by name.
use half::bf16;
use mkernel::gemm::{gather_rows, reference_row, BLayout, GatherGemm, Gemm, GemmOptions, GemmShape, Output, TILE_N};
use mkernel::gpu::DeviceBuffer;
use mkernel::testing::{gpu_or_skip, rel_err, Rng, POISON_BYTE};
use mkernel::Gpu;

/// One bf16 rounding of the output (at most 2^-8 relative) plus accumulation.
const BF16_OUT_TOL: f64 = 4e-3;

/// The plain GEMM's plan the gathered one runs: 256-column tiles on the staged ring, unsplit.
fn same_plan() -> GemmOptions {
    GemmOptions { tile_n: Some(TILE_N), deep_ring: Some(false), split_k: Some(1), ..Default::default() }
}

/// `m` row indices into `a_rows` rows, with repeats and about one in ten `u32::MAX`.
fn table(rng: &mut Rng, m: usize, a_rows: usize) -> Vec<u32> {
    (0..m).map(|_| if rng.next_u32().is_multiple_of(10) { u32::MAX } else { rng.next_u32() % a_rows as u32 }).collect()
}

/// The gathered GEMM (three launches back to back, then one more waited for) into `outs.0`, the
/// plain one on the picked rows into `outs.1`, both poisoned first; their output bytes.
fn run_both<T: bytemuck::Pod>(
    gpu: &Gpu,
    shape: GemmShape,
    layout: BLayout,
    (a, rows, picked, b): (&DeviceBuffer<bf16>, &DeviceBuffer<u32>, &DeviceBuffer<bf16>, &DeviceBuffer<bf16>),
    outs: (Output<'_>, Output<'_>),
    bufs: (&DeviceBuffer<T>, &DeviceBuffer<T>),
) -> (Vec<u8>, Vec<u8>) {
    bufs.0.fill_bytes(POISON_BYTE).unwrap();
    bufs.1.fill_bytes(POISON_BYTE).unwrap();
    let g = GatherGemm::new(gpu, shape, layout, a, rows, b, outs.0, same_plan()).unwrap();
    for _ in 0..3 {
        g.launch(gpu).unwrap(); // back to back: every launch writes the same C
    }
    g.run(gpu).unwrap();
    Gemm::new(gpu, shape, layout, picked, b, outs.1, same_plan()).unwrap().run(gpu).unwrap();
    let bytes = |c: &DeviceBuffer<T>| bytemuck::cast_slice::<T, u8>(&c.to_vec().unwrap()).to_vec();
    (bytes(bufs.0), bytes(bufs.1))
}

fn check(gpu: &Gpu, rng: &mut Rng, shape: GemmShape, a_rows: usize, layout: BLayout, f32_out: bool) {
    let GemmShape { m, n, k } = shape;
    let a = rng.bf16_vec(a_rows * k);
    let b = rng.bf16_vec(k * n);
    let rows = table(rng, m, a_rows);
    let picked = gather_rows(&a, &rows, k);
    let (da, dp, db, dr) =
        (gpu.upload(&a).unwrap(), gpu.upload(&picked).unwrap(), gpu.upload(&b).unwrap(), gpu.upload(&rows).unwrap());
    let (got, want) = if f32_out {
        let (cg, cp) = (gpu.alloc::<f32>(m * n).unwrap(), gpu.alloc::<f32>(m * n).unwrap());
        run_both(gpu, shape, layout, (&da, &dr, &dp, &db), (Output::F32(&cg), Output::F32(&cp)), (&cg, &cp))
    } else {
        let (cg, cp) = (gpu.alloc::<bf16>(m * n).unwrap(), gpu.alloc::<bf16>(m * n).unwrap());
        run_both(gpu, shape, layout, (&da, &dr, &dp, &db), (Output::Bf16(&cg), Output::Bf16(&cp)), (&cg, &cp))
    };
    assert!(got == want, "{m}x{n}x{k} from {a_rows} rows, B {layout:?}, f32 {f32_out}: not the plain GEMM's bits");
    // And the plain GEMM's bits are right: sampled rows against the f64 reference.
    let mut worst = 0f64;
    for i in [0, m / 3, m / 2, m - 1] {
        let reference = reference_row(&picked, &b, shape, layout, i);
        let row: Vec<f64> = if f32_out {
            bytemuck::cast_slice::<u8, f32>(&got[i * n * 4..(i + 1) * n * 4]).iter().map(|&x| x as f64).collect()
        } else {
            bytemuck::cast_slice::<u8, bf16>(&got[i * n * 2..(i + 1) * n * 2]).iter().map(|x| x.to_f64()).collect()
        };
        let re = rel_err(&row, &reference);
        worst = worst.max(re);
        assert!(re < BF16_OUT_TOL, "{m}x{n}x{k} row {i} (A row {}): rel err {re:.2e}", rows[i]);
    }
    println!("gather {m}x{n}x{k} from {a_rows} rows, B {layout:?}, f32 {f32_out}: bit-exact, worst sampled rel err {worst:.1e}");
}

#[test]
fn gathered_rows_match_the_plain_gemm() {
    let Some(gpu) = gpu_or_skip("gathered_rows_match_the_plain_gemm") else {
        return;
    };
    let mut rng = Rng::new(0x6a7e);
    for layout in [BLayout::NK, BLayout::KN] {
        check(&gpu, &mut rng, GemmShape { m: 300, n: 264, k: 72 }, 97, layout, false);
        check(&gpu, &mut rng, GemmShape { m: 1000, n: 520, k: 1032 }, 400, layout, true);
        check(&gpu, &mut rng, GemmShape { m: 129, n: 8, k: 64 }, 1, layout, false);
        check(&gpu, &mut rng, GemmShape { m: 4096, n: 2048, k: 7168 }, 1024, layout, false);
    }
}

#[test]
fn a_row_index_past_a_is_reported() {
    let Some(gpu) = gpu_or_skip("a_row_index_past_a_is_reported") else {
        return;
    };
    let mut rng = Rng::new(7);
    let (shape, a_rows) = (GemmShape { m: 200, n: 256, k: 128 }, 50);
    let a = gpu.upload(&rng.bf16_vec(a_rows * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
    let mut rows = table(&mut rng, shape.m, a_rows);
    rows[133] = a_rows as u32 + 3;
    let rows = gpu.upload(&rows).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    let g = GatherGemm::new(&gpu, shape, BLayout::NK, &a, &rows, &b, Output::Bf16(&c), same_plan()).unwrap();
    let err = g.run(&gpu).unwrap_err().to_string();
    assert!(err.contains("rows[133] = 53"), "{err}");
    g.run(&gpu).unwrap_err(); // reported again by the next launch, not lost
    let bad = GatherGemm::new(
        &gpu,
        shape,
        BLayout::NK,
        a.slice(0..a_rows * shape.k - 8),
        &rows,
        &b,
        Output::Bf16(&c),
        same_plan(),
    );
    assert!(bad.err().unwrap().to_string().contains("whole rows"));
}
