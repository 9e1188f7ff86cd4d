//! Flash-attention forward on the GPU against an f64 host reference of the same bf16 inputs:
//! both head dimensions, both layouts, causal and not, grouped-query heads, ragged and unequal
//! sequence lengths, B > 1, a peaked softmax (scale 1: the running max moves block to block),
//! the benchmark's shape on sampled rows, and back-to-back launches. Random data, poisoned
//! outputs: an element or log-sum-exp the kernel never wrote is NaN and fails.
//!
//! Error bound (bf16 in and out, fp32 softmax and accumulation): P is rounded to bf16 before
//! `P V` (at most 2^-8 relative per weight, bf16's unit roundoff) and O once more on output, so a
//! row's relative L2 error stays near 2^-8; we allow 1e-2, and 2e-3 absolute on the log-sum-exp
//! (fp32 `ex2` / `lg2`).
use half::bf16;
use mkernel::attention::{reference_row, Attention, AttentionOptions, AttentionShape, AttnLayout};
use mkernel::testing::{gpu_or_skip, rel_err, Rng, POISON_BYTE};
use mkernel::Gpu;

const O_TOL: f64 = 1e-2;
const LSE_TOL: f64 = 2e-3;

struct Case {
    shape: AttentionShape,
    layout: AttnLayout,
    causal: bool,
    scale: Option<f32>,
    /// Query rows checked per (batch, head) pair checked; all rows when the sequence is shorter.
    rows: usize,
    /// (batch, head) pairs checked: all when 0.
    heads_checked: usize,
}

fn rows_to_check(seq: usize, rng: &mut Rng, limit: usize) -> Vec<usize> {
    if seq <= limit {
        return (0..seq).collect();
    }
    let mut rows = vec![0, 1, seq - 1, 127.min(seq - 1), 128.min(seq - 1), (seq / 128) * 128 - 1];
    while rows.len() < limit {
        rows.push(rng.next_u64() as usize % seq);
    }
    rows.sort();
    rows.dedup();
    rows
}

fn check(gpu: &Gpu, rng: &mut Rng, c: &Case) {
    let s = c.shape;
    let (q, k, v) = (rng.bf16_vec(s.q_elements()), rng.bf16_vec(s.kv_elements()), rng.bf16_vec(s.kv_elements()));
    let (dq, dk, dv) = (gpu.upload(&q).unwrap(), gpu.upload(&k).unwrap(), gpu.upload(&v).unwrap());
    let o = gpu.alloc::<bf16>(s.q_elements()).unwrap();
    let lse = gpu.alloc::<f32>(s.lse_elements()).unwrap();
    o.fill_bytes(POISON_BYTE).unwrap();
    lse.fill_bytes(POISON_BYTE).unwrap();
    let opts = AttentionOptions { causal: c.causal, scale: c.scale, ..Default::default() };
    Attention::new(gpu, s, c.layout, (&dq, &dk, &dv), &o, Some(&lse), opts).unwrap().run(gpu).unwrap();
    let (o_h, lse_h) = (o.to_vec().unwrap(), lse.to_vec().unwrap());
    assert!(o_h.iter().all(|x| x.to_f32().is_finite()), "{s:?}: O has unwritten (NaN) elements");
    assert!(lse_h.iter().all(|x| !x.is_nan()), "{s:?}: lse has unwritten (NaN) elements");
    let scale = c.scale.unwrap_or(1.0 / (s.head_dim as f32).sqrt()) as f64;
    let mut pairs: Vec<(usize, usize)> = (0..s.batch).flat_map(|b| (0..s.heads).map(move |h| (b, h))).collect();
    if c.heads_checked > 0 && pairs.len() > c.heads_checked {
        let keep: Vec<_> = (0..c.heads_checked).map(|_| pairs[rng.next_u64() as usize % pairs.len()]).collect();
        pairs = keep;
    }
    let (mut worst, mut worst_lse, mut n) = (0f64, 0f64, 0);
    for &(b, h) in &pairs {
        for row in rows_to_check(s.seq_q, rng, c.rows) {
            let (want, want_lse) = reference_row((&q, &k, &v), s, c.layout, c.causal, scale, (b, h, row));
            let got: Vec<f64> = (0..s.head_dim)
                .map(|e| {
                    o_h[mkernel::attention::index(c.layout, (b, h, row, e), s.seq_q, s.heads, s.head_dim)].to_f64()
                })
                .collect();
            let err = rel_err(&got, &want);
            let got_lse = lse_h[(b * s.heads + h) * s.seq_q + row] as f64;
            let lse_err = (got_lse - want_lse).abs();
            assert!(
                err < O_TOL && lse_err < LSE_TOL,
                "{s:?} {:?} causal={}: b {b} h {h} row {row}: O rel err {err:.2e}, lse {got_lse} vs {want_lse}",
                c.layout,
                c.causal
            );
            worst = worst.max(err);
            worst_lse = worst_lse.max(lse_err);
            n += 1;
        }
    }
    println!(
        "attention b{} h{}/{} sq{} sk{} d{} {:?} causal={} scale={:?}: {n} rows, worst O rel err {worst:.2e}, lse abs err {worst_lse:.2e}",
        s.batch, s.heads, s.heads_kv, s.seq_q, s.seq_k, s.head_dim, c.layout, c.causal, c.scale
    );
}

#[test]
fn small_shapes_every_variant() {
    let Some(gpu) = gpu_or_skip("small_shapes_every_variant") else { return };
    let mut rng = Rng::fresh("small_shapes_every_variant");
    for d in [64, 128] {
        for layout in [AttnLayout::Bshd, AttnLayout::Bhsd] {
            for causal in [false, true] {
                // Two batch entries, GQA 4:2, a ragged length (300 = 2 x 128 + 44).
                let shape = AttentionShape { batch: 2, heads: 4, heads_kv: 2, seq_q: 300, seq_k: 300, head_dim: d };
                check(&gpu, &mut rng, &Case { shape, layout, causal, scale: None, rows: 64, heads_checked: 0 });
            }
        }
    }
}

#[test]
fn unequal_lengths_tiny_shapes_and_a_peaked_softmax() {
    let Some(gpu) = gpu_or_skip("unequal_lengths_tiny_shapes_and_a_peaked_softmax") else { return };
    let mut rng = Rng::fresh("unequal_lengths_tiny_shapes_and_a_peaked_softmax");
    let shapes = [
        // One row, one key.
        (1, 1, 1, 1, 1, 128),
        // Fewer keys than a block, more queries than keys (causal rows past seq_k see them all).
        (1, 2, 1, 200, 77, 64),
        // More keys than queries; MQA (one key/value head).
        (3, 4, 1, 129, 513, 128),
        // Exactly two blocks each.
        (1, 8, 8, 256, 256, 64),
    ];
    for (batch, heads, heads_kv, seq_q, seq_k, head_dim) in shapes {
        let shape = AttentionShape { batch, heads, heads_kv, seq_q, seq_k, head_dim };
        for causal in [false, true] {
            for scale in [None, Some(1.0)] {
                let case = Case { shape, layout: AttnLayout::Bhsd, causal, scale, rows: 48, heads_checked: 0 };
                check(&gpu, &mut rng, &case);
            }
        }
    }
}

#[test]
fn bench_shape_sampled_rows() {
    let Some(gpu) = gpu_or_skip("bench_shape_sampled_rows") else { return };
    let mut rng = Rng::fresh("bench_shape_sampled_rows");
    // The bench's D = 128 shape and its D = 64 one (three consumer warpgroups, 192-row tiles).
    for (heads, head_dim) in [(16, 128), (32, 64)] {
        let shape = AttentionShape { batch: 4, heads, heads_kv: heads, seq_q: 8192, seq_k: 8192, head_dim };
        for causal in [false, true] {
            let case = Case { shape, layout: AttnLayout::Bhsd, causal, scale: None, rows: 6, heads_checked: 3 };
            check(&gpu, &mut rng, &case);
        }
    }
}

#[test]
fn back_to_back_launches_agree_bitwise() {
    let Some(gpu) = gpu_or_skip("back_to_back_launches_agree_bitwise") else { return };
    let mut rng = Rng::fresh("back_to_back_launches_agree_bitwise");
    let s = AttentionShape { batch: 2, heads: 8, heads_kv: 4, seq_q: 1000, seq_k: 1000, head_dim: 128 };
    let (q, k, v) = (rng.bf16_vec(s.q_elements()), rng.bf16_vec(s.kv_elements()), rng.bf16_vec(s.kv_elements()));
    let (dq, dk, dv) = (gpu.upload(&q).unwrap(), gpu.upload(&k).unwrap(), gpu.upload(&v).unwrap());
    let o = gpu.alloc::<bf16>(s.q_elements()).unwrap();
    // Fewer CTAs than tiles: every CTA walks several tiles, reusing its Q slot and K/V rings.
    let opts = AttentionOptions { causal: true, ctas: Some(7), ..Default::default() };
    let attn = Attention::new(&gpu, s, AttnLayout::Bshd, (&dq, &dk, &dv), &o, None, opts).unwrap();
    attn.run(&gpu).unwrap();
    let first = o.to_vec().unwrap();
    o.fill_bytes(POISON_BYTE).unwrap();
    for _ in 0..50 {
        attn.launch(&gpu).unwrap();
    }
    attn.run(&gpu).unwrap();
    assert!(o.to_vec().unwrap() == first, "51 launches without a sync changed O");
    let (want, _) = reference_row((&q, &k, &v), s, AttnLayout::Bshd, true, 1.0 / (128f64).sqrt(), (1, 5, 999));
    let got: Vec<f64> = (0..128)
        .map(|e| first[mkernel::attention::index(AttnLayout::Bshd, (1, 5, 999, e), 1000, 8, 128)].to_f64())
        .collect();
    assert!(rel_err(&got, &want) < O_TOL);
    println!("attention: 52 launches (7 CTAs, causal, BSHD) agree bitwise; last row matches the reference");
}

#[test]
fn bad_arguments_are_typed_errors_before_launch() {
    let Some(gpu) = gpu_or_skip("bad_arguments_are_typed_errors_before_launch") else { return };
    let s = AttentionShape { batch: 1, heads: 2, heads_kv: 2, seq_q: 64, seq_k: 64, head_dim: 64 };
    let buf = gpu.alloc::<bf16>(s.q_elements()).unwrap();
    let short = gpu.alloc::<bf16>(s.q_elements() - 1).unwrap();
    let lse = gpu.alloc::<f32>(1).unwrap();
    let err = |r: mkernel::Result<Attention>| r.err().expect("should fail").to_string();
    let opts = AttentionOptions::default();
    let e = err(Attention::new(&gpu, s, AttnLayout::Bhsd, (&buf, &short, &buf), &buf, None, opts));
    assert!(e.contains("`k`"), "{e}");
    let e = err(Attention::new(&gpu, s, AttnLayout::Bhsd, (&buf, &buf, &buf), &buf, Some(&lse), opts));
    assert!(e.contains("lse"), "{e}");
    let e = err(Attention::new(
        &gpu,
        AttentionShape { head_dim: 80, ..s },
        AttnLayout::Bhsd,
        (&buf, &buf, &buf),
        &buf,
        None,
        opts,
    ));
    assert!(e.contains("head_dim"), "{e}");
    let e = err(Attention::new(
        &gpu,
        AttentionShape { heads_kv: 3, ..s },
        AttnLayout::Bhsd,
        (&buf, &buf, &buf),
        &buf,
        None,
        opts,
    ));
    assert!(e.contains("heads_kv"), "{e}");
    let bad_scale = AttentionOptions { scale: Some(f32::NAN), ..opts };
    let e = err(Attention::new(&gpu, s, AttnLayout::Bhsd, (&buf, &buf, &buf), &buf, None, bad_scale));
    assert!(e.contains("scale"), "{e}");
}
