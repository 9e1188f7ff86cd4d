//! GEMM correctness on the GPU against an f64 host reference of the same bf16 inputs: one tile of
//! each width, ragged shapes, both B layouts, bf16 and f32 output, and 8192^3 on sampled rows;
//! the tiles narrower than 256 columns (64, 128, 192, 224) at ragged shapes and at the shapes the
//! defaults give them; split-K at the small shapes it serves and at its boundaries (k-blocks not a
//! multiple of the split, more units than CTAs, one k-block per unit), in every width. Random
//! data, poisoned outputs (a NaN left anywhere fails).
use half::bf16;
use mkernel::gemm::{
    default_split_k, default_tile_n, reference_row, BLayout, Gemm, GemmOptions, GemmShape, Output, TILE_N, TILE_WIDTHS,
};
use mkernel::gpu::DeviceBuffer;
use mkernel::testing::{gpu_or_skip, max_scaled_err, rel_err, Rng, POISON_BYTE};
use mkernel::Gpu;

/// bf16 output carries one rounding (at most 2^-8 relative, bf16's unit roundoff; less in RMS);
/// f32 output only accumulation error.
const BF16_OUT_TOL: f64 = 4e-3;
const F32_OUT_TOL: f64 = 1e-4;

fn rows_to_check(m: usize, rng: &mut Rng, limit: usize) -> Vec<usize> {
    if m <= limit {
        return (0..m).collect();
    }
    // First and last rows of the matrix and of a tile edge, plus random ones.
    let mut rows = vec![0, m - 1, 127.min(m - 1), 128.min(m - 1), ((m / 128) * 128).max(1) - 1];
    while rows.len() < limit {
        rows.push(rng.next_u64() as usize % m);
    }
    rows.sort();
    rows.dedup();
    rows
}

fn check(
    gpu: &Gpu,
    rng: &mut Rng,
    shape: GemmShape,
    layout: BLayout,
    f32_out: bool,
    row_limit: usize,
    opts: GemmOptions,
) {
    let GemmShape { m, n, k } = shape;
    let a = rng.bf16_vec(m * k);
    let b = rng.bf16_vec(k * n);
    let (da, db) = (gpu.upload(&a).unwrap(), gpu.upload(&b).unwrap());
    let rows = rows_to_check(m, rng, row_limit);
    let got: Vec<Vec<f64>> = if f32_out {
        let c = gpu.alloc::<f32>(m * n).unwrap();
        c.fill_bytes(POISON_BYTE).unwrap();
        Gemm::new(gpu, shape, layout, &da, &db, Output::F32(&c), opts).unwrap().run(gpu).unwrap();
        rows.iter()
            .map(|&i| c.slice(i * n..(i + 1) * n).to_vec().unwrap().iter().map(|&x| x as f64).collect())
            .collect()
    } else {
        let c = gpu.alloc::<bf16>(m * n).unwrap();
        c.fill_bytes(POISON_BYTE).unwrap();
        Gemm::new(gpu, shape, layout, &da, &db, Output::Bf16(&c), opts).unwrap().run(gpu).unwrap();
        rows.iter()
            .map(|&i| c.slice(i * n..(i + 1) * n).to_vec().unwrap().iter().map(|x| x.to_f64()).collect())
            .collect()
    };
    let tol = if f32_out { F32_OUT_TOL } else { BF16_OUT_TOL };
    let mut worst = 0f64;
    for (row, &i) in got.iter().zip(&rows) {
        let want = reference_row(&a, &b, shape, layout, i);
        let (re, me) = (rel_err(row, &want), max_scaled_err(row, &want, 0.05 * (k as f64).sqrt()));
        worst = worst.max(re);
        assert!(
            re < tol && me < 10.0 * tol,
            "{m}x{n}x{k} B {layout:?} f32_out={f32_out}: row {i}: rel err {re:.2e}, max scaled {me:.2e}"
        );
    }
    println!(
        "gemm {m}x{n}x{k} B {layout:?} {}: {} rows checked, worst row rel err {worst:.2e}",
        if f32_out { "f32" } else { "bf16" },
        rows.len()
    );
}

#[test]
fn one_tile() {
    let Some(gpu) = gpu_or_skip("one_tile") else { return };
    let mut rng = Rng::fresh("one_tile");
    for w in TILE_WIDTHS {
        let opts = GemmOptions { tile_n: Some(w), ..Default::default() };
        for layout in [BLayout::NK, BLayout::KN] {
            for f32_out in [false, true] {
                check(&gpu, &mut rng, GemmShape { m: 128, n: w as usize, k: 64 }, layout, f32_out, 128, opts);
            }
        }
    }
}

#[test]
fn narrow_tiles_on_ragged_and_small_shapes() {
    // 64-, 128-, 192- and 224-column tiles (9-, 7-, 5- and 4-stage rings) at edges, one row, a
    // ring that wraps over the tiles of 7 CTAs, split-K in each width, bf16 and f32 out; then
    // the shapes the defaults give them, and what they refuse. 224 columns with B [K, N] load a
    // last box half past the tile (the next tile's columns, or zeros past the matrix).
    let Some(gpu) = gpu_or_skip("narrow_tiles_on_ragged_and_small_shapes") else { return };
    let mut rng = Rng::fresh("narrow_tiles_on_ragged_and_small_shapes");
    let narrow = TILE_WIDTHS.into_iter().filter(|&w| w != TILE_N);
    for w in narrow.clone() {
        let opts = GemmOptions { tile_n: Some(w), ..GemmOptions::default() };
        for &(m, n, k) in &[(1, 8, 8), (129, 264, 72), (64, 4104, 776), (256, 1000, 1032)] {
            for layout in [BLayout::NK, BLayout::KN] {
                check(&gpu, &mut rng, GemmShape { m, n, k }, layout, false, 64, opts);
            }
        }
        check(&gpu, &mut rng, GemmShape { m: 77, n: 1000, k: 328 }, BLayout::KN, true, 77, opts);
        let few = GemmOptions { ctas: Some(7), ..opts };
        check(&gpu, &mut rng, GemmShape { m: 1100, n: 1040, k: 328 }, BLayout::NK, false, 48, few);
        for (split, f32_out) in [(3, false), (2, true)] {
            let opts = GemmOptions { split_k: Some(split), ..opts };
            for layout in [BLayout::NK, BLayout::KN] {
                check(&gpu, &mut rng, GemmShape { m: 300, n: 520, k: 1000 }, layout, f32_out, 24, opts);
            }
        }
    }
    let sms = gpu.info().sm_count;
    for &(m, n, k, want) in &[
        (128, 8192, 8192, 64),
        (256, 8192, 8192, 128),
        (16, 4096, 14336, 64),
        (256, 14336, 1032, 224),
        (320, 8192, 1032, 192),
        (512, 28672, 264, 224),
    ] {
        let shape = GemmShape { m, n, k };
        assert_eq!(default_tile_n(shape, BLayout::NK, sms), want, "{m}x{n}x{k}: default tile width");
        for layout in [BLayout::NK, BLayout::KN] {
            check(&gpu, &mut rng, shape, layout, false, 6, GemmOptions::default());
        }
    }
    // Deterministic across launches.
    let shape = GemmShape { m: 200, n: 4096, k: 2056 };
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    for w in narrow {
        let g = Gemm::new(
            &gpu,
            shape,
            BLayout::KN,
            &a,
            &b,
            Output::Bf16(&c),
            GemmOptions { tile_n: Some(w), ..Default::default() },
        )
        .unwrap();
        assert_eq!(g.tile_n(), w);
        same_bits_after_relaunches(&gpu, &g, &c, 20, "a later narrow-tile launch produced different bits");
    }
    // Widths the kernels do not have, or with the staged ring, are refused before any launch.
    for bad in [
        GemmOptions { tile_n: Some(96), ..Default::default() },
        GemmOptions { tile_n: Some(0), ..Default::default() },
        GemmOptions { tile_n: Some(64), deep_ring: Some(false), ..Default::default() },
    ] {
        let e = Gemm::new(&gpu, shape, BLayout::KN, &a, &b, Output::Bf16(&c), bad);
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("tile_n"), "{bad:?}: {msg}");
    }
}

#[test]
fn ragged_shapes() {
    let Some(gpu) = gpu_or_skip("ragged_shapes") else { return };
    let mut rng = Rng::fresh("ragged_shapes");
    let shapes = [(1000, 1544, 4104), (1, 8, 8), (129, 264, 72), (300, 520, 1000), (2048, 136, 200), (77, 4096, 8)];
    for &(m, n, k) in &shapes {
        for layout in [BLayout::NK, BLayout::KN] {
            check(&gpu, &mut rng, GemmShape { m, n, k }, layout, false, 96, GemmOptions::default());
        }
    }
    check(&gpu, &mut rng, GemmShape { m: 1000, n: 1544, k: 4104 }, BLayout::NK, true, 64, GemmOptions::default());
    check(&gpu, &mut rng, GemmShape { m: 333, n: 1000, k: 512 }, BLayout::KN, true, 64, GemmOptions::default());
}

#[test]
fn persistent_schedule_variants() {
    // Fewer CTAs than tiles (each CTA walks many tiles, the ring wraps across tiles) and
    // different raster groupings must give the same product.
    let Some(gpu) = gpu_or_skip("persistent_schedule_variants") else { return };
    let mut rng = Rng::fresh("persistent_schedule_variants");
    // u32::MAX: a group taller than the grid walks as the grid (no wrap in 32 bits).
    let sms = gpu.info().sm_count;
    for (ctas, group_m) in [(1, 1), (7, 3), (sms, 16), (5, u32::MAX)] {
        let opts = GemmOptions { ctas: Some(ctas), group_m, ..Default::default() };
        check(&gpu, &mut rng, GemmShape { m: 1100, n: 1040, k: 328 }, BLayout::NK, false, 48, opts);
    }
}

#[test]
fn both_rings_on_ragged_shapes() {
    // The deep ring (four stages, stores straight from registers) and the staged one (three,
    // bf16 through staging tiles and TMA stores) must each be right at any shape, whichever the
    // default picks: edges, one row, a ring that wraps across the tiles of a CTA (7 CTAs),
    // bf16 and f32 out.
    let Some(gpu) = gpu_or_skip("both_rings_on_ragged_shapes") else { return };
    let mut rng = Rng::fresh("both_rings_on_ragged_shapes");
    for deep in [true, false] {
        let opts = GemmOptions { deep_ring: Some(deep), ..GemmOptions::default().whole_tiles() };
        for &(m, n, k) in &[(1, 8, 8), (129, 264, 72), (64, 4104, 776), (300, 520, 1000)] {
            for layout in [BLayout::NK, BLayout::KN] {
                check(&gpu, &mut rng, GemmShape { m, n, k }, layout, false, 64, opts);
            }
        }
        check(&gpu, &mut rng, GemmShape { m: 77, n: 1000, k: 328 }, BLayout::KN, true, 77, opts);
        let few = GemmOptions { ctas: Some(7), ..opts };
        check(&gpu, &mut rng, GemmShape { m: 1100, n: 1040, k: 328 }, BLayout::NK, false, 48, few);
    }
}

#[test]
fn large_8192_cubed_sampled() {
    let Some(gpu) = gpu_or_skip("large_8192_cubed_sampled") else { return };
    let mut rng = Rng::fresh("large_8192_cubed_sampled");
    for layout in [BLayout::NK, BLayout::KN] {
        check(&gpu, &mut rng, GemmShape { m: 8192, n: 8192, k: 8192 }, layout, false, 12, GemmOptions::default());
    }
}

#[test]
fn repeated_launches_are_deterministic() {
    let Some(gpu) = gpu_or_skip("repeated_launches_are_deterministic") else { return };
    let mut rng = Rng::fresh("repeated_launches_are_deterministic");
    let shape = GemmShape { m: 1536, n: 2048, k: 1024 };
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    let g = Gemm::new(&gpu, shape, BLayout::KN, &a, &b, Output::Bf16(&c), GemmOptions::default()).unwrap();
    same_bits_after_relaunches(&gpu, &g, &c, 20, "a later launch produced different bits: a race");
}

/// Run `g`, then `n` launches back to back (no host synchronisation), then once more into a
/// poisoned C: the first and the last result must be the same bits. Returns them.
fn same_bits_after_relaunches(gpu: &Gpu, g: &Gemm, c: &DeviceBuffer<bf16>, n: usize, what: &str) -> Vec<bf16> {
    g.run(gpu).unwrap();
    let first = c.to_vec().unwrap();
    for _ in 0..n {
        g.launch(gpu).unwrap();
    }
    c.fill_bytes(POISON_BYTE).unwrap();
    g.run(gpu).unwrap();
    assert!(first == c.to_vec().unwrap(), "{what}");
    first
}

#[test]
fn split_k_small_and_skinny_shapes() {
    let Some(gpu) = gpu_or_skip("split_k_small_and_skinny_shapes") else { return };
    let mut rng = Rng::fresh("split_k_small_and_skinny_shapes");
    // The default split of the decode-like shapes in 256-column tiles (4 units per tile at N =
    // 8192, 8 at N = 4096), and at the default width where that still splits (two units of 64
    // tiles of 64 columns at N = 4096).
    let sms = gpu.info().sm_count;
    for &(m, n, k, wide) in &[
        (1, 8192, 8192, true),
        (16, 8192, 8192, true),
        (64, 4096, 14336, true),
        (200, 8192, 1032, true),
        (64, 4096, 14336, false),
    ] {
        let shape = GemmShape { m, n, k };
        let tile_n = if wide { TILE_N } else { default_tile_n(shape, BLayout::NK, sms) };
        let opts = GemmOptions { tile_n: Some(tile_n), ..Default::default() };
        let split = default_split_k(shape, sms, tile_n);
        assert!(split > 1, "{m}x{n}x{k}, {tile_n} columns: expected split-K by default, got {split}");
        for layout in [BLayout::NK, BLayout::KN] {
            check(&gpu, &mut rng, shape, layout, false, 6, opts);
        }
    }
    // Forced splits at ragged shapes: k-blocks not a multiple of the split (16 / 5, 65 / 3), one
    // k-block per unit (2 / 2), more units than CTAs (56 tiles x 3 over 7 CTAs), f32 output; in
    // the default widths (256 columns for the first two, 64 for the others).
    let cases = [
        ((300, 520, 1000), 5, None, false),
        ((1000, 1544, 4104), 3, Some(7), false),
        ((129, 264, 72), 2, None, true),
        ((77, 4096, 512), 8, None, true),
    ];
    for ((m, n, k), split, ctas, f32_out) in cases {
        let opts = GemmOptions { split_k: Some(split), ctas, ..Default::default() };
        for layout in [BLayout::NK, BLayout::KN] {
            check(&gpu, &mut rng, GemmShape { m, n, k }, layout, f32_out, 24, opts);
        }
    }
}

#[test]
fn split_k_is_deterministic_and_checked() {
    let Some(gpu) = gpu_or_skip("split_k_is_deterministic_and_checked") else { return };
    let mut rng = Rng::fresh("split_k_is_deterministic_and_checked");
    // 16 tiles of 256 columns x 8 splits: every unit its own CTA, so the units sum together.
    let shape = GemmShape { m: 64, n: 4096, k: 4096 };
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    let opts = GemmOptions { split_k: Some(8), tile_n: Some(TILE_N), ..Default::default() };
    let g = Gemm::new(&gpu, shape, BLayout::NK, &a, &b, Output::Bf16(&c), opts).unwrap();
    assert_eq!(g.splits(), 8);
    // Each launch takes the next epoch of the arrival counters, and the sum runs in split order
    // whichever unit finishes last.
    let first = same_bits_after_relaunches(&gpu, &g, &c, 50, "a later split-K launch produced different bits");
    // Every unit its own CTA (the units of a tile sum together) or fewer CTAs (the last unit
    // sums alone): the same sums in the same order, the same bits.
    let few =
        Gemm::new(&gpu, shape, BLayout::NK, &a, &b, Output::Bf16(&c), GemmOptions { ctas: Some(19), ..opts }).unwrap();
    c.fill_bytes(POISON_BYTE).unwrap();
    few.run(&gpu).unwrap();
    assert!(first == c.to_vec().unwrap(), "split-K over 19 CTAs differs from one CTA per unit");
    // Splits the k-blocks cannot take are refused before anything launches.
    for bad in [0, 65, 33] {
        let e = Gemm::new(
            &gpu,
            shape,
            BLayout::NK,
            &a,
            &b,
            Output::Bf16(&c),
            GemmOptions { split_k: Some(bad), ..Default::default() },
        );
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("split_k"), "split_k = {bad}: {msg}");
    }
}

#[test]
fn stream_k_shapes_and_boundaries() {
    let Some(gpu) = gpu_or_skip("stream_k_shapes_and_boundaries") else { return };
    let mut rng = Rng::fresh("stream_k_shapes_and_boundaries");
    // Forced (no shape takes it by default): the decode shape it was written for (112 tiles on
    // every SM); at ragged shapes, ranges crossing tile boundaries (33 tiles x 16 k-blocks over
    // 40 CTAs), more CTAs than k-blocks per tile (4 tiles x 2 over 5), f32 output.
    let sms = gpu.info().sm_count;
    for ((m, n, k), ctas, f32_out) in [
        ((16, 28672, 8192), sms, false),
        ((300, 2600, 1000), 40, false),
        ((129, 264, 72), 5, true),
        ((77, 4096, 8200), 23, false),
    ] {
        let opts = GemmOptions { stream_k: true, ctas: Some(ctas), tile_n: Some(TILE_N), ..Default::default() };
        for layout in [BLayout::NK, BLayout::KN] {
            check(&gpu, &mut rng, GemmShape { m, n, k }, layout, f32_out, 24, opts);
        }
    }
    // Deterministic across launches (the sum runs in k order whichever range finishes last).
    let shape = GemmShape { m: 100, n: 28672, k: 2048 };
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n)).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    let opts = GemmOptions { stream_k: true, tile_n: Some(TILE_N), ..Default::default() };
    let g = Gemm::new(&gpu, shape, BLayout::NK, &a, &b, Output::Bf16(&c), opts).unwrap();
    assert!(g.stream_k() && g.splits() == 1);
    same_bits_after_relaunches(&gpu, &g, &c, 50, "a later stream-K launch produced different bits");
    // What stream-K cannot take is refused before anything launches.
    for (bad, what) in [
        (GemmOptions { stream_k: true, split_k: Some(2), ..Default::default() }, "with a split"),
        (
            GemmOptions { stream_k: true, ctas: Some(50), tile_n: Some(TILE_N), ..Default::default() },
            "more tiles than CTAs",
        ),
        (GemmOptions { stream_k: true, tile_n: Some(128), ..Default::default() }, "narrow tiles"),
    ] {
        let e = Gemm::new(&gpu, shape, BLayout::NK, &a, &b, Output::Bf16(&c), bad);
        let msg = e.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("stream_k"), "{what}: {msg}");
    }
}

#[test]
fn options_that_break_a_rule_are_typed_errors() {
    // Before anything launches, naming the option and the rule: more CTAs than SMs, a device
    // wait bound of zero or past the device clock's wrap, a B that TMA cannot load.
    let Some(gpu) = gpu_or_skip("options_that_break_a_rule_are_typed_errors") else { return };
    let shape = GemmShape { m: 256, n: 256, k: 256 };
    let mut rng = Rng::fresh("options_that_break_a_rule_are_typed_errors");
    let a = gpu.upload(&rng.bf16_vec(shape.m * shape.k)).unwrap();
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n + 8)).unwrap();
    let c = gpu.alloc::<bf16>(shape.m * shape.n).unwrap();
    let arg = |opts: GemmOptions, b: mkernel::gpu::DeviceSlice<'_, bf16>| match Gemm::new(
        &gpu,
        shape,
        BLayout::NK,
        &a,
        b,
        Output::Bf16(&c),
        opts,
    ) {
        Err(mkernel::Error::InvalidArgument { arg, rule }) => (arg, rule),
        Err(e) => panic!("expected InvalidArgument, got {e}"),
        Ok(_) => panic!("accepted"),
    };
    let sms = gpu.info().sm_count;
    let (name, rule) = arg(GemmOptions { ctas: Some(sms + 1), ..Default::default() }, b.as_slice());
    assert!(name == "ctas" && rule.contains(&format!("1..={sms}")), "{name}: {rule}");
    for t in [std::time::Duration::ZERO, std::time::Duration::from_secs(7200)] {
        let (name, rule) = arg(GemmOptions { timeout: t, ..Default::default() }, b.as_slice());
        assert!(name == "timeout" && rule.contains("must be between"), "{name}: {rule}");
    }
    let (name, rule) = arg(GemmOptions::default(), b.slice(4..4 + shape.k * shape.n));
    assert!(name == "b" && rule.contains("16-byte aligned"), "{name}: {rule}");
    println!("typed errors: ctas, timeout (0 and 2 h), a misaligned b");
}
