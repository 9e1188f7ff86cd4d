//! GEMM + ReduceScatter / AllReduce on the command line: the per-rank correctness check the
//! multi-process tests run (`rank-check gemm-rs|gemm-ar`) and the benchmark (`bench
//! gemm-rs|gemm-ar`).
use crate::cmd_rank::{
    agreed_seed, alternating_checks, bench_rank, enqueue_copy, enqueue_fill, same_bits, Captured, RepeatArgs,
    ALTERNATING_ROUNDS,
};
use crate::trace::TraceArgs;
use crate::RanksArgs;
use anyhow::{bail, ensure, Context};
use half::bf16;
use mkernel::bench::{harness, RankGroup, RunInfo, Timing};
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::transport::NicModel;
use mkernel::comm::world::World;
use mkernel::gemm::{reference_row_bounded, BLayout, GemmShape};
use mkernel::ops::gemm_rs::{Collective, GemmRs, GemmRsOptions};
use mkernel::ops::{Path, PathChoice};
use mkernel::testing::{Rng, POISON_BYTE};
use mkernel::Gpu;
use std::path::Path as FsPath;
use std::time::Duration;

/// What `rank-check gemm-rs|gemm-ar` runs.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// M x N x K, all of them (each rank holds A[M, K/W] and B[K/W, N]).
    #[arg(long, value_parser = crate::args::shape, default_value = "2000x1544x1024")]
    pub shape: GemmShape,
    /// B layout.
    #[arg(long, value_parser = crate::args::layout, default_value = "kn")]
    pub layout: BLayout,
    /// f32 output instead of bf16.
    #[arg(long)]
    pub f32: bool,
    #[command(flatten)]
    pub knobs: Knobs,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    /// Bound on each bootstrap step and device wait.
    #[arg(long = "timeout-ms", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
}

/// The fused kernel's knobs, shared by `rank-check` and `bench` (defaults: `ops::gemm_rs`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct Knobs {
    /// Rounds of sends before each rank's first collected tile (one node: own tile; several
    /// nodes: in each half of the walk), or `all` (default: the tuned table's, else every send
    /// first, two waves for a reduce-scatter over more than two ranks, one wave of the first half
    /// over several nodes; two-phase form).
    #[arg(long, value_parser = crate::args::lead)]
    pub lead: Option<u32>,
    /// All-reduce on one node: one shot (on) or two phases (off); default: by the partial's size.
    #[arg(long = "one-shot", value_parser = clap::builder::BoolishValueParser::new())]
    pub one_shot: Option<bool>,
    /// One node, two phases: sources push their partials (on) or owners pull them (off);
    /// default: pull at two ranks, push above.
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub push: Option<bool>,
    /// One node, two phases, owners pulling: send tiles prefetch the own tiles' partials (on).
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub prefetch: Option<bool>,
    /// Two-phase all-reduce on one node, bf16 output: ranks pull each other's reduced tiles (on)
    /// instead of the owners pushing them (off); default: on at two ranks from 32 MiB partials
    /// and K/W = 4096.
    #[arg(long = "pull-reduced", value_parser = clap::builder::BoolishValueParser::new())]
    pub pull_reduced: Option<bool>,
    /// Nanoseconds between the first two tiles' sends of CTAs i % 8 apart (0: none; default:
    /// 2500 for the pushed two-phase reduce-scatter and all-reduce on one node above two ranks,
    /// of 8 waves of tiles or more).
    #[arg(long = "stagger-ns")]
    pub stagger_ns: Option<u32>,
    /// One node, two phases: the copy engines move the partials (and the all-reduce's reduced
    /// blocks) band by band instead of the helpers' bulk copies (on); default: on at two ranks
    /// from 64 MiB of partial (reduce-scatter), 128 MiB and 8 bands (all-reduce).
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub engines: Option<bool>,
    /// With the copy engines, the all-reduce's last bands the helpers push themselves (default 1).
    #[arg(long = "engine-tail")]
    pub engine_tail: Option<u32>,
    /// Tile rows walked together within an owner block (L2 reuse; with the copy engines also a
    /// band); default 8.
    #[arg(long = "group-m", value_parser = clap::value_parser!(u32).range(1..))]
    pub group_m: Option<u32>,
    /// Several nodes: CTAs pushing node partials into the FIFO.
    #[arg(long = "inter-send")]
    pub inter_send: Option<u32>,
    /// Several nodes: CTAs adding the node partials that arrive.
    #[arg(long = "inter-reduce")]
    pub inter_reduce: Option<u32>,
    /// Several nodes: tiles per FIFO WRITE of a node partial.
    #[arg(long)]
    pub group: Option<u32>,
}

impl Knobs {
    /// The op's options with these knobs.
    pub fn options(&self, base: GemmRsOptions) -> GemmRsOptions {
        GemmRsOptions {
            lead: self.lead,
            one_shot: self.one_shot,
            push: self.push,
            prefetch: self.prefetch,
            pull_reduced: self.pull_reduced,
            stagger_ns: self.stagger_ns,
            engines: self.engines,
            engine_tail: self.engine_tail,
            group_m: self.group_m.unwrap_or(base.group_m),
            inter_send: self.inter_send,
            inter_reduce: self.inter_reduce,
            group: self.group,
            ..base
        }
    }
}

/// Rank `r`'s A (`[M, K/W]`) and B in round `round`: fresh random values from the run's seed,
/// different for every rank, reproducible on every rank.
fn inputs(seed: u64, round: u32, r: u32, a_len: usize, b_len: usize) -> (Vec<bf16>, Vec<bf16>) {
    let mut rng = Rng::new(seed ^ ((round as u64) << 40) ^ ((r as u64 + 1) * 0x9e37_79b9_7f4a_7c15));
    (rng.bf16_vec(a_len), rng.bf16_vec(b_len))
}

/// `rank-check gemm-rs|gemm-ar`: fresh rank-encoded inputs, poisoned outputs; the fused result
/// bit for bit against the unfused path, and within the precision contract of an f64 host
/// reference on sampled rows; rounds with new inputs and no barrier; launches back to back; CUDA
/// graph replays.
pub fn check(world: &World, collective: Collective, a: CheckArgs) -> anyhow::Result<()> {
    let gpu = Gpu::new(world.device)?;
    gpu.check_fits("--shape", a.shape.operand_elements(), 2)?;
    let GemmShape { m, n, k } = a.shape;
    let w = world.world_size as usize;
    ensure!(m % w == 0 && k % (8 * w) == 0, "--shape: M must be a multiple of {w} and K of {}", 8 * w);
    let local = GemmShape { m, n, k: k / w };
    let timeout = Duration::from_millis(a.timeout_ms);
    let opts =
        a.knobs.options(GemmRsOptions { out_f32: a.f32, path: PathChoice::Fused, timeout, ..Default::default() });
    let heap = GemmRs::heap_bytes(collective, a.shape, world, &opts) + (64 << 20);
    let comm = Communicator::new(&gpu, world, CommOptions { heap_bytes: heap, timeout, ..CommOptions::from_env()? })?;
    let seed = agreed_seed(&comm, "rank-check gemm-rs")?;
    let (a_buf, b_buf) = (gpu.alloc::<bf16>(m * local.k)?, gpu.alloc::<bf16>(local.k * n)?);
    let op = GemmRs::new(&comm, &gpu, collective, a.shape, a.layout, &a_buf, &b_buf, opts)?;
    let rows = m / w;
    let (row0, out_rows) = match collective {
        Collective::ReduceScatter => (world.rank as usize * rows, rows),
        Collective::AllReduce => (0, m),
    };
    let read = || -> anyhow::Result<Vec<f64>> {
        Ok(match (op.output_bf16(), op.output_f32()) {
            (Some(o), _) => o.to_vec()?.iter().map(|x| x.to_f64()).collect(),
            (_, Some(o)) => o.to_vec()?.iter().map(|&x| x as f64).collect(),
            _ => bail!("no output"),
        })
    };
    let mut rng = Rng::new(seed ^ 0x5a5a ^ world.rank as u64);
    let mut check_round = |round: u32, what: &str| -> anyhow::Result<()> {
        let got = read()?;
        let srcs: Vec<_> = (0..w as u32).map(|r| inputs(seed, round, r, m * local.k, local.k * n)).collect();
        let mut sample: Vec<usize> = vec![0, out_rows - 1, out_rows / 2];
        sample.extend((0..10).map(|_| rng.next_u64() as usize % out_rows));
        let mut worst = 0f64;
        for &i in &sample {
            let gi = row0 + i;
            let parts: Vec<_> =
                srcs.iter().map(|(sa, sb)| reference_row_bounded(sa, sb, local, a.layout, gi)).collect();
            for j in 0..n {
                let exact: f64 = parts.iter().map(|(p, _)| p[j]).sum();
                let mag: f64 = parts.iter().map(|(p, _)| p[j].abs()).sum();
                let accumulation: f64 = parts.iter().map(|(_, e)| e[j]).sum();
                let out = got[i * n + j];
                // The precision contract (ops::gemm_rs): each partial accumulated in fp32 on the
                // tensor cores (`reference_row_bounded`: held to the products' size, which a
                // cancelling sum needs), rounded to bf16 once, summed in fp32, with several nodes
                // each node's sum rounded to bf16 once, the sum rounded once (not for f32
                // output); each rounding held to u, bf16's unit roundoff (the sampled worst
                // reaches 0.97 of this bound: it is not loose).
                let u = 2f64.powi(-8);
                let nodes = world.nodes as usize;
                let bound = accumulation
                    + u * mag
                    + if nodes > 1 { u * mag } else { 0.0 }
                    + if a.f32 { 0.0 } else { u * out.abs() }
                    + (w + nodes) as f64 * 2f64.powi(-24) * mag
                    + 1e-6;
                let err = (out - exact).abs();
                ensure!(
                    err.is_finite() && err <= bound,
                    "rank {} {what}: out[{gi}][{j}] = {out} vs exact {exact}: error {err:.3e} beyond the contract's {bound:.3e}",
                    world.rank
                );
                worst = worst.max(err / bound);
            }
        }
        println!(
            "rank {} {what}: sampled rows within the precision contract (worst error / bound {worst:.2})",
            world.rank
        );
        Ok(())
    };
    let load = |round: u32| -> anyhow::Result<()> {
        let (ha, hb) = inputs(seed, round, world.rank, m * local.k, local.k * n);
        a_buf.copy_from(&ha)?;
        b_buf.copy_from(&hb)?;
        op.output_bytes().fill_bytes(POISON_BYTE)?;
        Ok(())
    };
    let roles = op.roles();
    println!(
        "rank {} of {} ({} nodes, transport {}): {} {m}x{n}x{k} {:?} {} out, {} compute CTAs, lead {}, one shot {}, push {}, engines {}, prefetch {}, pull reduced {}, {} inter-send + {} inter-reduce CTAs, group {}; by default {}",
        world.rank,
        world.world_size,
        world.nodes,
        comm.transport(),
        collective.op_name(),
        a.layout,
        if a.f32 { "f32" } else { "bf16" },
        roles.compute,
        op.lead(),
        op.one_shot(),
        op.push(),
        op.engines(),
        op.prefetch(),
        op.pull_reduced(),
        roles.inter_send,
        roles.inter_reduce,
        op.group(),
        op.describe_path()
    );
    for round in 0..a.repeat.rounds {
        load(round)?;
        op.launch_path(&gpu, Path::Fused)?;
        op.wait(&gpu)?;
        check_round(round, &format!("round {round} (fused)"))?;
        let fused = read()?;
        op.output_bytes().fill_bytes(POISON_BYTE)?;
        op.launch_path(&gpu, Path::Unfused)?;
        op.wait(&gpu)?;
        let unfused = read()?;
        same_bits(world.rank, "out", &fused, &unfused, n)?;
    }
    // More rounds, cycling from launch to launch (their inputs staged on the device).
    let next = a.repeat.rounds;
    let staged = (0..ALTERNATING_ROUNDS as u32)
        .map(|which| {
            let (ha, hb) = inputs(seed, next + which, world.rank, m * local.k, local.k * n);
            Ok((gpu.upload(&ha)?, gpu.upload(&hb)?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stage = |which: usize| -> anyhow::Result<()> {
        let (sa, sb) = &staged[which];
        // SAFETY: every buffer outlives this function, which waits for the stream before it returns.
        unsafe {
            enqueue_copy(&gpu, &a_buf.as_slice(), &sa.as_slice())?;
            enqueue_copy(&gpu, &b_buf.as_slice(), &sb.as_slice())?;
            enqueue_fill(&gpu, &op.output_bytes(), POISON_BYTE)
        }
    };
    let outputs = [Captured::either("out", op.output_bf16(), op.output_f32(), n)?];
    let verify = |which: usize, what: &str| check_round(next + which as u32, what);
    alternating_checks(&gpu, &op, Path::Fused, &a.repeat, 3, &outputs, stage, verify, |_, _, _| false)?;
    comm.barrier()?;
    println!(
        "{} ok: rank {} of {} ({} nodes); proxy {:?}",
        collective.op_name(),
        world.rank,
        world.world_size,
        world.nodes,
        comm.proxy_stats()
    );
    Ok(())
}

/// The roles' names in a timeline's summary, by `sched::Role`'s values.
const RS_ROLES: [&str; 4] = ["compute", "intra-comm", "inter-send", "inter-reduce"];

/// `bench gemm-rs|gemm-ar`: fused, unfused and the GEMM alone, interleaved; the slowest rank's
/// medians.
pub fn bench(
    collective: Collective,
    (shapes, layouts): (&[GemmShape], &[BLayout]),
    opts: GemmRsOptions,
    ranks: &RanksArgs,
    timing: Timing,
    json: Option<&FsPath>,
    trace: &TraceArgs,
) -> anyhow::Result<()> {
    trace.check_one(shapes.len() * layouts.len(), "shape and one layout")?;
    let elements = |_: &World| shapes.iter().map(GemmShape::operand_elements).collect();
    // One op lives at a time.
    let heap =
        |w: &World| shapes.iter().map(|&s| GemmRs::heap_bytes(collective, s, w, &opts)).max().unwrap_or(0) + (64 << 20);
    let Some((world, gpu, comm)) = bench_rank(ranks, "--shapes", elements, heap)? else { return Ok(()) };
    let w = world.world_size as usize;
    let run = RunInfo { gpu: gpu.info().name.clone(), world: world.world_size, nodes: world.nodes };
    let mut group = RankGroup::new(&comm, &gpu, timing.device_barrier)?;
    let mut records = Vec::new();
    for &s in shapes {
        ensure!(s.m % w == 0 && s.k % (8 * w) == 0, "--shapes: M must be a multiple of {w} and K of {}", 8 * w);
        let mut rng = Rng::new(0x5eed ^ world.rank as u64);
        let a = gpu.upload(&rng.bf16_vec(s.m * s.k / w))?;
        let b = gpu.upload(&rng.bf16_vec(s.k / w * s.n))?;
        for &l in layouts {
            let op = GemmRs::new(&comm, &gpu, collective, s, l, &a, &b, opts.clone())?;
            let mut fused = || op.launch_path(&gpu, Path::Fused);
            let mut unfused = || op.launch_path(&gpu, Path::Unfused);
            let mut gemm = || op.launch_gemm_only(&gpu);
            let timeline = trace.select(&gpu)?;
            let ms = harness::time_each(&gpu, &mut group, timing, &mut [&mut fused, &mut unfused, &mut gemm])?;
            op.wait(&gpu)?;
            trace.report(timeline.as_ref(), world.rank, &RS_ROLES, "")?;
            // Then one launch of the GEMM alone, warm, for its own timeline beside the fused one.
            if let Some(plain) = trace.select_plain(&gpu)? {
                op.launch_gemm_only(&gpu)?;
                op.wait(&gpu)?;
                trace.report(Some(&plain), world.rank, &RS_ROLES, "-gemm-alone")?;
            }
            let flops = 2.0 * s.m as f64 * s.n as f64 * (s.k / w) as f64; // per GPU
                                                                          // Several nodes: what this rank's NIC carries (node partials), at the NIC model's
                                                                          // rate (the emulated NIC's default: one 400 Gb/s ConnectX-7).
            let model_ms =
                (world.nodes > 1).then(|| NicModel::cx7().transfer_time(op.inter_node_bytes()).as_secs_f64() * 1e3);
            let roles = op.roles();
            for (imp, &t) in ["mkernel-fused", "mkernel-unfused", "gemm-alone"].iter().zip(&ms) {
                let r = run
                    .record(collective.op_name(), s.label(), l.name(), imp, t)
                    .with_flops(flops)
                    .with("fused_over_gemm", ms[0] / ms[2])
                    .with("compute_ctas", roles.compute)
                    .with("pull_reduced", op.pull_reduced())
                    .with("inter_send_ctas", roles.inter_send)
                    .with("inter_reduce_ctas", roles.inter_reduce)
                    .with("group", op.group())
                    .with("lead", op.lead())
                    .with("one_shot", op.one_shot())
                    .with("push", op.push())
                    .with("prefetch", op.prefetch())
                    .with("stagger_ns", op.stagger_ns())
                    .with("engines", op.engines())
                    .with("engine_tail", op.engine_tail())
                    .with("default_path", op.describe_path())
                    .timed_with(timing);
                records.push(match model_ms {
                    Some(mm) => r.with("modelled_inter_node_ms", mm).with("overlap_vs_model", t / ms[2].max(mm)),
                    None => r,
                });
            }
        }
    }
    if world.rank == 0 {
        println!(
            "{}, {} ranks on {} node(s) ({}), slowest rank's median of {} launches (TFLOP/s per GPU: its K/W share)",
            collective.op_name(),
            world.world_size,
            world.nodes,
            comm.transport(),
            timing.reps
        );
        harness::print_table(&records, Some("mkernel-fused"));
        for r in records.iter().filter(|r| r.imp == "mkernel-fused") {
            if let Some(v) = r.extra.get("overlap_vs_model").and_then(|v| v.as_f64()) {
                let mm = r.extra.get("modelled_inter_node_ms").and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
                println!("{} {}: fused / max(GEMM alone, modelled inter-node {mm:.3} ms) = {v:.3}", r.shape, r.layout);
            }
        }
        if let Some(path) = json {
            harness::write_json(path, &records).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

/// The knobs `tune gemm-rs|gemm-ar` sweeps (each list: the values to try).
#[derive(Clone, Debug)]
pub struct TuneKnobs {
    /// One node: rounds of sends before the first own tile (`u32::MAX`: every send first).
    pub leads: Vec<u32>,
    /// Several nodes: inter-reduce CTAs.
    pub inter_reduce: Vec<u32>,
    /// Several nodes: tiles per FIFO WRITE.
    pub groups: Vec<u32>,
}

/// A point must beat the defaults by more than this fraction to replace them in the table: single
/// timings of points a few percent apart swap places from run to run (measured: a lead that won
/// a sweep by 1.8% lost by 3-6% in four reruns).
const TUNE_MARGIN: f64 = 0.02;

/// The points of the sweep, each with its options and how to name it: the defaults first (the
/// rules of thumb alone, not an earlier table's choice), then the knobs' values.
fn tune_points(collective: Collective, nodes: u32, k: &TuneKnobs) -> Vec<(GemmRsOptions, serde_json::Value)> {
    // The table's leads are the helpers' sends' (the copy engines take no tuned lead).
    let base = GemmRsOptions { tuned: false, engines: Some(false), ..Default::default() };
    let mut points = vec![(base.clone(), serde_json::json!({ "defaults": true }))];
    if nodes > 1 {
        for &ir in &k.inter_reduce {
            for &g in &k.groups {
                let o = GemmRsOptions { inter_reduce: Some(ir), group: Some(g), ..base.clone() };
                points.push((o, serde_json::json!({ "inter_reduce": ir, "group": g })));
            }
        }
        return points;
    }
    let all_reduce = collective == Collective::AllReduce;
    for &lead in &k.leads {
        let o = GemmRsOptions { lead: Some(lead), one_shot: all_reduce.then_some(false), ..base.clone() };
        points.push((o, serde_json::json!({ "lead": lead, "one_shot": all_reduce.then_some(false) })));
    }
    if all_reduce {
        // One shot walks one fixed order on every rank: no lead.
        let o = GemmRsOptions { one_shot: Some(true), ..base };
        points.push((o, serde_json::json!({ "one_shot": true })));
    }
    points
}

/// `tune gemm-rs|gemm-ar`: per shape, the defaults and every point of [`TuneKnobs`] (one node:
/// the lead, and for the all-reduce one shot too; several nodes: inter-reduce CTAs x group),
/// fused and unfused interleaved; the fastest fused point if it beats the defaults by more than
/// [`TUNE_MARGIN`], its knobs as they ran, and the unfused path only if it beats that point by
/// as much (against the median of the unfused times, one per point), as the JSON lines of
/// `host/ops/tuned/gemm_rs.jsonl`. Several-node lines name the transport they were measured
/// over.
pub fn tune(
    collective: Collective,
    shapes: &[GemmShape],
    knobs: &TuneKnobs,
    ranks: &RanksArgs,
    (timing, rounds): (Timing, u32),
    out: &FsPath,
) -> anyhow::Result<()> {
    let elements = |_: &World| shapes.iter().map(GemmShape::operand_elements).collect();
    // One op lives at a time: the largest of any point's.
    let heap = |w: &World| {
        let points = tune_points(collective, w.nodes, knobs);
        let each = |s: GemmShape| points.iter().map(|(o, _)| GemmRs::heap_bytes(collective, s, w, o)).max();
        shapes.iter().filter_map(|&s| each(s)).max().unwrap_or(0) + (64 << 20)
    };
    let Some((world, gpu, comm)) = bench_rank(ranks, "--shapes", elements, heap)? else { return Ok(()) };
    let w = world.world_size as usize;
    let points = tune_points(collective, world.nodes, knobs);
    let name = collective.op_name();
    let bar = harness::progress((shapes.len() * points.len()) as u64 * rounds as u64, "tune");
    let mut lines = Vec::new();
    for s in shapes {
        ensure!(s.m % w == 0 && s.k % (8 * w) == 0, "--shapes: M must be a multiple of {w} and K of {}", 8 * w);
    }
    for &s in shapes {
        let mut rng = Rng::new(0x7e57 ^ world.rank as u64);
        let a = gpu.upload(&rng.bf16_vec(s.m * s.k / w))?;
        let b = gpu.upload(&rng.bf16_vec(s.k / w * s.n))?;
        let mut sweep = crate::cmd_rank::Sweep::new();
        // Per point: the knobs as it ran them (a null where the point left the default).
        let mut ran = Vec::new();
        for round in 1..=rounds {
            for (i, (opts, fields)) in points.iter().enumerate() {
                let op = GemmRs::new(&comm, &gpu, collective, s, BLayout::KN, &a, &b, opts.clone())?;
                let [f, u] = sweep.point(&gpu, &comm, timing, &op, (i as u32, 0))?;
                if world.rank == 0 {
                    eprintln!("tune {name} {} {fields} round {round}: fused {f:.4} ms, unfused {u:.4} ms", s.label());
                }
                if round == 1 {
                    let lead = (!op.one_shot() && opts.lead.is_some()).then(|| op.lead());
                    ran.push(if world.nodes > 1 {
                        serde_json::json!({ "inter_reduce": op.roles().inter_reduce, "group": op.group(),
                                            "transport": comm.transport() })
                    } else {
                        let one_shot = (collective == Collective::AllReduce).then(|| op.one_shot());
                        serde_json::json!({ "lead": lead, "one_shot": one_shot })
                    });
                }
                bar.inc(1);
            }
        }
        // Each point's medians over the rounds.
        let med = |i: usize| sweep.medians((i as u32, 0)).context("a point was not timed");
        let ((best, _), best_ms, _, _) = sweep.result()?;
        // The defaults stay unless beaten clearly; so does the fused path.
        let i = if best_ms < med(0)?.0 * (1.0 - TUNE_MARGIN) { best as usize } else { 0 };
        let fused_ms = med(i)?.0;
        let mut unfused = (0..points.len()).map(|i| med(i).map(|m| m.1)).collect::<anyhow::Result<Vec<f64>>>()?;
        unfused.sort_by(f64::total_cmp);
        let unfused_ms = unfused[unfused.len() / 2];
        let path = if unfused_ms < fused_ms * (1.0 - TUNE_MARGIN) { "unfused" } else { "fused" };
        let mut line = serde_json::json!({
            "op": name, "world": world.world_size, "nodes": world.nodes, "m": s.m, "n": s.n, "k": s.k,
            "lead": null, "one_shot": null, "inter_reduce": null, "group": null,
            "path": path, "fused_ms": fused_ms, "unfused_ms": unfused_ms,
            "gpu": gpu.info().name, "commit": harness::COMMIT,
        });
        if let (Some(l), Some(k)) = (line.as_object_mut(), ran[i].as_object()) {
            l.extend(k.clone());
        }
        lines.push(line);
    }
    bar.finish_and_clear();
    crate::cmd_rank::write_tune_table(&world, &lines, out, "gemm_rs")
}
