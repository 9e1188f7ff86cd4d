//! AllGather + GEMM on the command line: the per-rank correctness check the multi-process tests
//! run (`rank-check ag-gemm`), the benchmark (`bench ag-gemm`) and the role-split sweep
//! (`tune ag-gemm`).
use crate::cmd_rank::{
    agreed_seed, alternating_checks, bench_rank, enqueue_copy, enqueue_fill, Captured, RepeatArgs, Sweep,
    ALTERNATING_ROUNDS,
};
use crate::trace::TraceArgs;
use crate::RanksArgs;
use anyhow::{bail, ensure, Context};
use half::bf16;
use mkernel::bench::{harness, RankGroup, Record, RunInfo, Timing};
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::transport::NicModel;
use mkernel::comm::world::World;
use mkernel::gemm::{reference_row, BLayout, GemmShape, Output};
use mkernel::gemm::{TILE_M, TILE_N};
use mkernel::gpu::DeviceBuffer;
use mkernel::ops::ag_gemm::{AgGemm, AgGemmOptions, AgInput, Path, PathChoice};
use mkernel::testing::{max_scaled_err, rel_err, Rng, POISON_BYTE};
use mkernel::Gpu;
use std::path::Path as FsPath;
use std::time::Duration;

/// What `rank-check ag-gemm` runs.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// M (in all: each rank holds M / world rows) x N x K.
    #[arg(long, value_parser = crate::args::shape, default_value = "2000x1544x1032")]
    pub shape: GemmShape,
    /// B layout.
    #[arg(long, value_parser = crate::args::layout, default_value = "kn")]
    pub layout: BLayout,
    /// f32 output instead of bf16.
    #[arg(long)]
    pub f32: bool,
    /// The shard is written into the op's gathered buffer (no input buffer).
    #[arg(long = "in-place")]
    pub in_place: bool,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    #[command(flatten)]
    pub knobs: Knobs,
    /// Bound on each bootstrap step and device wait.
    #[arg(long = "timeout-ms", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
}

/// The op's tuning options on the command line.
#[derive(clap::Args, Debug, Clone)]
pub struct Knobs {
    /// NVLink push CTAs (default: per shape).
    #[arg(long = "push-ctas", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub push_ctas: Option<u32>,
    /// Rows per arrival flag (default: per shape).
    #[arg(long = "chunk-rows", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunk_rows: Option<u32>,
    /// Forward CTAs with several nodes (default 2).
    #[arg(long = "fwd-ctas", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub fwd_ctas: Option<u32>,
    /// Which path `launch` runs.
    #[arg(long, value_enum, default_value_t = PathArg::Auto)]
    pub path: PathArg,
    /// Push CTAs copy each chunk to every other local rank at once, each piece loaded once.
    #[arg(long)]
    pub fan: bool,
    /// Compute CTAs claim tiles from a counter (true) or walk fixed shares (false) (default:
    /// with several nodes).
    #[arg(long)]
    pub dynamic: Option<bool>,
    /// Push CTAs run tiles too after their copies: drawn ones on a dynamic walk, a share of
    /// a static walk from `--join-wave` on (default: with a dynamic walk).
    #[arg(long)]
    pub join: Option<bool>,
    /// A static walk with `--join true`: the compute CTAs' wave from which the push CTAs share
    /// the tiles (default: by when the copies should be out).
    #[arg(long = "join-wave")]
    pub join_wave: Option<u32>,
    /// K-blocks before a tile's last load at which its CTA claims the next tile (0: at the
    /// tile boundary).
    #[arg(long = "claim-ahead", default_value_t = 4)]
    pub claim_ahead: u32,
    /// Cut the tiles past the claiming CTAs' last full wave into k-ranges over all of them
    /// (stream-K) (default: on a static walk).
    #[arg(long = "tail-split")]
    pub tail_split: Option<bool>,
    /// The arrival tail: the walk's last N tile rows (with several nodes the last to land) run
    /// one after another, each tile cut into --tail-ways k-ranges (drawn walk only; 0: none;
    /// default: 2 where the modelled link takes 1.5x the GEMM or more over 8 waves of tiles or
    /// more, else none).
    #[arg(long = "tail-rows")]
    pub tail_rows: Option<u32>,
    /// K-ranges per arrival-tail tile, 2 to 8 (default 2).
    #[arg(long = "tail-ways")]
    pub tail_ways: Option<u32>,
    /// Every few compute CTAs' spare warps copy part of the shard beside the push CTAs
    /// (default: on one node of four ranks or more).
    #[arg(long)]
    pub spread: Option<bool>,
    /// Bytes per unit of a spread copy (a multiple of 16; default 64 KiB).
    #[arg(long = "spread-unit")]
    pub spread_unit: Option<u32>,
    /// With --spread: every N-th compute CTA copies (default 6).
    #[arg(long = "spread-every", value_parser = clap::value_parser!(u32).range(1..))]
    pub spread_every: Option<u32>,
    /// With --spread: the push CTAs copy every N-th chunk, the compute CTAs the rest (default 2).
    #[arg(long = "spread-push-every", value_parser = clap::value_parser!(u32).range(2..))]
    pub spread_push_every: Option<u32>,
    /// The copy engines copy the shard inside the node instead of push CTAs (default off).
    #[arg(long)]
    pub engines: Option<bool>,
}

/// The roles' names in a timeline's summary, by `sched::Role`'s values.
const AG_GEMM_ROLES: [&str; 3] = ["compute", "intra-comm (push, forward)", "inter-send"];

/// `--path`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum PathArg {
    /// Per shape (tuned table, else rule of thumb).
    Auto,
    /// One persistent launch.
    Fused,
    /// All-gather, then GEMM.
    Unfused,
}

impl Knobs {
    fn options(&self, timeout: Duration) -> AgGemmOptions {
        AgGemmOptions {
            push_ctas: self.push_ctas,
            chunk_rows: self.chunk_rows,
            fwd_ctas: self.fwd_ctas,
            fan: self.fan,
            dynamic: self.dynamic,
            join: self.join,
            join_wave: self.join_wave,
            claim_ahead: self.claim_ahead,
            tail_split: self.tail_split,
            tail_rows: self.tail_rows,
            tail_ways: self.tail_ways,
            spread: self.spread,
            spread_unit: self.spread_unit,
            spread_every: self.spread_every,
            spread_push_every: self.spread_push_every,
            engines: self.engines,
            path: match self.path {
                PathArg::Auto => PathChoice::Auto,
                PathArg::Fused => PathChoice::Fused,
                PathArg::Unfused => PathChoice::Unfused,
            },
            timeout,
            ..Default::default()
        }
    }
}

/// Rank `r`'s shard of A in round `round`: fresh random values from the run's seed, different for
/// every rank (so a misrouted chunk is caught), reproducible on every rank.
fn shard_of(seed: u64, round: u32, r: u32, len: usize) -> Vec<bf16> {
    Rng::new(seed ^ 0xa5a5_0000 ^ ((round as u64) << 40) ^ ((r as u64 + 1) * 0x9e37_79b9)).bf16_vec(len)
}

/// Each element as f64.
fn to_f64<T: Copy>(v: &[T], f: impl Fn(T) -> f64) -> Vec<f64> {
    v.iter().map(|&x| f(x)).collect()
}

/// `rank-check ag-gemm`: fresh rank-encoded data, poisoned outputs; the gathered A checked
/// exactly, C against the unfused path (bitwise: same tiles, same k order) and an f64 host
/// reference on sampled rows; rounds with new inputs and no barrier; launches back to back; CUDA
/// graph replays.
pub fn check(world: &World, a: CheckArgs) -> anyhow::Result<()> {
    let gpu = Gpu::new(world.device)?;
    gpu.check_fits("--shape", a.shape.operand_elements(), 2)?;
    let timeout = Duration::from_millis(a.timeout_ms);
    let GemmShape { m, n, k } = a.shape;
    let w = world.world_size as usize;
    ensure!(m % w == 0, "--shape: M = {m} must be a multiple of the world size {w}");
    let rows = m / w;
    let heap = 2 * m * k * 2 + (64 << 20);
    let comm = Communicator::new(&gpu, world, CommOptions { heap_bytes: heap, timeout, ..CommOptions::from_env()? })?;
    let seed = agreed_seed(&comm, "rank-check ag-gemm")?;
    let b_host = Rng::new(seed ^ 0xb0b0 ^ world.rank as u64).bf16_vec(k * n);
    let b = gpu.upload(&b_host)?;
    let a_buf = gpu.alloc::<bf16>(rows * k)?;
    let c16 = gpu.alloc::<bf16>(if a.f32 { 1 } else { m * n })?;
    let c32 = gpu.alloc::<f32>(if a.f32 { m * n } else { 1 })?;
    let out = if a.f32 { Output::F32(&c32) } else { Output::Bf16(&c16) };
    let input = if a.in_place { AgInput::InPlace } else { AgInput::Buffer(&a_buf) };
    let op = AgGemm::new(&comm, &gpu, a.shape, a.layout, input, &b, out, a.knobs.options(timeout))?;
    let read_c = || -> anyhow::Result<Vec<f64>> {
        Ok(if a.f32 { to_f64(&c32.to_vec()?, |x| x as f64) } else { to_f64(&c16.to_vec()?, |x: bf16| x.to_f64()) })
    };
    let poison_c = || -> anyhow::Result<()> {
        c16.fill_bytes(POISON_BYTE)?;
        c32.fill_bytes(POISON_BYTE)?;
        Ok(())
    };
    let mut rng = Rng::new(seed ^ world.rank as u64);
    let tail = &op.tail().tiles;
    let mut tail_rows: Vec<u32> = tail.iter().map(|&(tm, _)| tm).collect();
    tail_rows.sort_unstable();
    tail_rows.dedup();
    let mut check_round = |round: u32, what: &str| -> anyhow::Result<()> {
        // The gathered A, exactly: every rank's shard at its rows.
        let gathered = op.gathered().to_vec()?;
        let mut a_full = Vec::with_capacity(m * k);
        for r in 0..w as u32 {
            a_full.extend(shard_of(seed, round, r, rows * k));
        }
        if let Some(i) = gathered.iter().zip(&a_full).position(|(g, want)| g.to_bits() != want.to_bits()) {
            let (row, col) = (i / k, i % k);
            bail!(
                "rank {} {what}: gathered A[{row}][{col}] (rank {}'s row {}) is {} instead of {}",
                world.rank,
                row / rows,
                row % rows,
                gathered[i],
                a_full[i]
            );
        }
        // C against an f64 host reference of the same bf16 inputs, on sampled rows.
        let got = read_c()?;
        let mut sample: Vec<usize> = vec![0, m - 1, rows - 1, rows.min(m - 1), (m / 2).min(m - 1)];
        sample.extend((0..12).map(|_| rng.next_u64() as usize % m));
        // A row of each half of every tile row the tail's k-ranges write (each consumer
        // warpgroup sums its own half's partials).
        for half_row in [37, 101] {
            sample.extend(tail_rows.iter().map(|&tm| (tm as usize * TILE_M as usize + half_row).min(m - 1)));
        }
        let (tol, atol) = if a.f32 { (1e-4, 0.05 * (k as f64).sqrt()) } else { (4e-3, 0.05 * (k as f64).sqrt()) };
        let mut worst = (0f64, 0f64);
        for &i in &sample {
            let want = reference_row(&a_full, &b_host, a.shape, a.layout, i);
            let row = &got[i * n..(i + 1) * n];
            let (re, me) = (rel_err(row, &want), max_scaled_err(row, &want, atol));
            worst = (worst.0.max(re), worst.1.max(me));
            ensure!(
                re <= tol && me <= 8.0 * tol,
                "rank {} {what}: C row {i} differs from the host reference (rel err {re:.2e}, max scaled {me:.2e}, bound {tol:.0e})",
                world.rank
            );
        }
        println!(
            "rank {} {what}: gathered A exact, C rows rel err <= {:.2e} (max scaled {:.2e})",
            world.rank, worst.0, worst.1
        );
        Ok(())
    };
    let write_shard = |round: u32| -> anyhow::Result<()> {
        let mine = shard_of(seed, round, world.rank, rows * k);
        if a.in_place {
            op.gathered().fill_bytes(POISON_BYTE)?;
            op.shard().copy_from(&mine)?;
        } else {
            op.gathered().fill_bytes(POISON_BYTE)?;
            a_buf.copy_from(&mine)?;
        }
        Ok(())
    };
    println!(
        "rank {} of {} ({} nodes, transport {}): ag_gemm {m}x{n}x{k} {:?} {} path {:?} split {:?}, tail of {} tiles from position {}",
        world.rank,
        world.world_size,
        world.nodes,
        comm.transport(),
        a.layout,
        if a.f32 { "f32" } else { "bf16" },
        op.path(),
        op.split(),
        op.tail().count(),
        op.tail().dp
    );
    for round in 0..a.repeat.rounds {
        write_shard(round)?;
        poison_c()?;
        op.run(&gpu)?;
        check_round(round, &format!("round {round} ({})", op.path().name()))?;
        // The other path on the same inputs: C must match bit for bit.
        let first = read_c()?;
        let other = if op.path() == Path::Fused { Path::Unfused } else { Path::Fused };
        write_shard(round)?;
        poison_c()?;
        op.launch_path(&gpu, other)?;
        op.wait(&gpu)?;
        check_round(round, &format!("round {round} ({})", other.name()))?;
        let second = read_c()?;
        same_bits_but_tail(world.rank, (&first, &second), n, tail, a.f32)?;
    }
    // More rounds, cycling from launch to launch (their shards staged on the device). Each
    // launch's inputs are enqueued after the previous launch: in place that rewrites this rank's
    // rows of the gathered A, which peers may read only within a launch. The rest of the gathered
    // A is poisoned too (nobody writes into it before this rank's next launch raised `ready`,
    // after the poison).
    let next = a.repeat.rounds;
    let staged = (0..ALTERNATING_ROUNDS as u32)
        .map(|which| Ok(gpu.upload(&shard_of(seed, next + which, world.rank, rows * k))?))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let stage = |which: usize| -> anyhow::Result<()> {
        let g = op.gathered();
        let shard = staged[which].as_slice();
        // SAFETY: every buffer outlives this function, which waits for the stream before it returns.
        unsafe {
            if a.in_place {
                let own = world.rank as usize * rows * k..(world.rank as usize + 1) * rows * k;
                enqueue_fill(&gpu, &g.slice(0..own.start), POISON_BYTE)?;
                enqueue_fill(&gpu, &g.slice(own.end..g.len()), POISON_BYTE)?;
                enqueue_copy(&gpu, &op.shard(), &shard)?;
            } else {
                enqueue_fill(&gpu, &g, POISON_BYTE)?;
                enqueue_copy(&gpu, &a_buf.as_slice(), &shard)?;
            }
            enqueue_fill(&gpu, &c16.as_slice(), POISON_BYTE)?;
            enqueue_fill(&gpu, &c32.as_slice(), POISON_BYTE)
        }
    };
    // C only: every row of the gathered A feeds C, so a row read stale, poisoned or half
    // written shows there; the gathered A itself is checked exactly after each reference launch.
    // (Copying it out after every launch too, M x K bytes, made the four-GPU cases take minutes:
    // 2026-11-28, call 4.)
    let c = if a.f32 { Captured::of("C", &c32.as_slice(), n) } else { Captured::of("C", &c16.as_slice(), n) };
    let outputs = [c];
    let verify = |which: usize, what: &str| check_round(next + which as u32, what);
    alternating_checks(&gpu, &op, op.path(), &a.repeat, 5, &outputs, stage, verify, |_, _, _| false)?;
    comm.barrier()?;
    println!("ag_gemm ok: rank {} of {}; proxy {:?}", world.rank, world.world_size, comm.proxy_stats());
    Ok(())
}

/// C of the two paths: bit for bit in whole tiles (same tiles, same k order); in the tail's tiles
/// (`tail`: tile row, tile column), whose k-ranges' f32 partials are summed in another order,
/// within a rounding step of the output type: 2^-7 relative for bf16 (about two units in the last
/// place), 1e-5 for f32, each plus 1e-3 absolute for values near zero.
fn same_bits_but_tail(
    rank: u32,
    (a, b): (&[f64], &[f64]),
    n: usize,
    tail: &[(u32, u32)],
    f32: bool,
) -> anyhow::Result<()> {
    let (tm, tn) = (TILE_M as usize, TILE_N as usize);
    let mut in_tail = vec![false; a.len()];
    for &(r, c) in tail {
        for i in r as usize * tm..((r as usize + 1) * tm).min(a.len() / n) {
            let cols = c as usize * tn..((c as usize + 1) * tn).min(n);
            in_tail[i * n + cols.start..i * n + cols.end].fill(true);
        }
    }
    let rel = if f32 { 1e-5 } else { 1.0 / 128.0 };
    let bad = (0..a.len()).find(|&i| {
        if in_tail[i] {
            // Written so that a NaN (a poisoned element never written) fails.
            let close = (a[i] - b[i]).abs() <= rel * a[i].abs().max(b[i].abs()) + 1e-3;
            !close
        } else {
            a[i].to_bits() != b[i].to_bits()
        }
    });
    if let Some(i) = bad {
        let how = if in_tail[i] { "beyond rounding in a tail tile" } else { "in a whole tile" };
        bail!("rank {rank}: C[{}][{}] differs between the paths {how}: {} vs {}", i / n, i % n, a[i], b[i]);
    }
    Ok(())
}

/// This process's rank of a bench or tune run (`None` in the launcher), its GPU and a communicator
/// whose heap holds the largest gathered A with room to spare.
/// [`bench_rank`] for AllGather + GEMM shapes (the heap holds the gathered A).
fn ag_rank(ranks: &RanksArgs, shapes: &[GemmShape]) -> anyhow::Result<Option<(World, Gpu, Communicator)>> {
    let elements = |_: &World| shapes.iter().map(GemmShape::operand_elements).collect();
    let heap = |_: &World| shapes.iter().map(|s| s.m * s.k * 2).max().unwrap_or(0) + (64 << 20);
    bench_rank(ranks, "--shapes", elements, heap)
}

/// `bench ag-gemm`: fused, unfused, GEMM alone and the all-gather alone (the fused kernel's
/// communication with no compute), interleaved; the slowest rank's medians.
#[allow(clippy::too_many_arguments)]
pub fn bench(
    shapes: &[GemmShape],
    layouts: &[BLayout],
    knobs: &Knobs,
    in_place: bool,
    ranks: &RanksArgs,
    timing: Timing,
    json: Option<&FsPath>,
    trace: &TraceArgs,
) -> anyhow::Result<()> {
    trace.check_one(shapes.len() * layouts.len(), "shape and one layout")?;
    let Some((world, gpu, comm)) = ag_rank(ranks, shapes)? else { return Ok(()) };
    let w = world.world_size as usize;
    let run = RunInfo { gpu: gpu.info().name.clone(), world: world.world_size, nodes: world.nodes };
    let mut records = Vec::new();
    let mut group = RankGroup::new(&comm, &gpu, timing.device_barrier)?;
    let bar = harness::progress((shapes.len() * layouts.len()) as u64, "bench ag-gemm");
    for &s in shapes {
        ensure!(s.m % w == 0, "--shapes: M = {} must be a multiple of the world size {w}", s.m);
        let mut rng = Rng::new(0x5eed ^ world.rank as u64);
        let a = gpu.upload(&rng.bf16_vec(s.m / w * s.k))?;
        let b = gpu.upload(&rng.bf16_vec(s.k * s.n))?;
        let c = gpu.alloc::<bf16>(s.m * s.n)?;
        for &l in layouts {
            let op = AgGemm::new(
                &comm,
                &gpu,
                s,
                l,
                if in_place { AgInput::InPlace } else { AgInput::Buffer(&a) },
                &b,
                Output::Bf16(&c),
                knobs.options(Duration::from_secs(10)),
            )?;
            if in_place {
                // The same random shard, now inside the gathered buffer (never time on zeros).
                op.shard().copy_from(&a.to_vec()?)?;
            }
            let timeline = trace.select(&gpu)?;
            let ms = time_variants(&gpu, &mut group, &op, timing)?;
            trace.report(timeline.as_ref(), world.rank, &AG_GEMM_ROLES, "")?;
            records.extend(
                records_for(&run, &op, s, l, &ms).into_iter().map(|r| r.with("in_place", in_place).timed_with(timing)),
            );
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    if world.rank == 0 {
        println!(
            "AllGather + GEMM, {} ranks on {} node(s) ({}), slowest rank's median of {} launches; overlap = fused / max(GEMM alone, all-gather alone)",
            world.world_size,
            world.nodes,
            comm.transport(),
            timing.reps
        );
        harness::print_table(&records, Some("mkernel-fused"));
        for r in records.iter().filter(|r| r.imp == "mkernel-fused") {
            let f = |k: &str| r.extra.get(k).and_then(|v| v.as_f64()).map_or("-".into(), |v| format!("{v:.3}"));
            println!(
                "{} {}: overlap efficiency {} (fused / max(GEMM alone, all-gather alone)), vs modelled inter-node {}, path {}",
                r.shape,
                r.layout,
                f("overlap_efficiency"),
                f("overlap_vs_model"),
                r.extra.get("chosen_path").and_then(|v| v.as_str()).unwrap_or("?")
            );
        }
        if let Some(path) = json {
            harness::write_json(path, &records).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

/// The variants `bench ag-gemm` times, in order.
const VARIANTS: [&str; 5] =
    ["mkernel-fused", "mkernel-unfused", "gemm-alone", "ag-alone-fused-split", "ag-alone-unfused"];

/// [`VARIANTS`], interleaved: medians in that order. The all-gather alone twice: the fused
/// kernel's communication with its own CTA split and no compute, and our standalone all-gather
/// (what the unfused path runs: its default copy and CTAs; `ag-alone-16cta` in records before
/// the default became 64 CTAs of `lsu`).
fn time_variants(gpu: &Gpu, group: &mut RankGroup, op: &AgGemm, timing: Timing) -> anyhow::Result<Vec<f64>> {
    let mut fused = || op.launch_path(gpu, Path::Fused);
    let mut unfused = || op.launch_path(gpu, Path::Unfused);
    let mut gemm = || op.launch_gemm_only(gpu);
    let mut ag = || op.launch_comm_only(gpu);
    let mut ag_unfused = || op.launch_allgather_only(gpu);
    let ms =
        harness::time_each(gpu, group, timing, &mut [&mut fused, &mut unfused, &mut gemm, &mut ag, &mut ag_unfused])?;
    op.wait(gpu)?;
    Ok(ms)
}

/// Records of one shape; overlap efficiency = time / max(GEMM alone, the faster all-gather alone).
fn records_for(run: &RunInfo, op: &AgGemm, s: GemmShape, l: BLayout, ms: &[f64]) -> Vec<Record> {
    let split = op.split();
    let (ag_copy, ag_ctas) = op.unfused_allgather();
    let ag_copy = format!("{ag_copy:?}").to_lowercase();
    let ideal = ms[2].max(ms[3].min(ms[4]));
    let gathered_bytes = (s.m * s.k * 2) as f64 * (run.world as f64 - 1.0) / run.world as f64;
    VARIANTS
        .iter()
        .zip(ms)
        .map(|(imp, &t)| {
            let r = run.record("ag_gemm", s.label(), l.name(), imp, t).with_flops(s.flops());
            let r = if imp.starts_with("ag-alone") { r.with_bytes(gathered_bytes) } else { r };
            // Several nodes: each rank's NIC carries its shard once to every other node.
            let model_ms = (run.nodes > 1).then(|| {
                let shard = (s.m / run.world as usize * s.k * 2) as u64;
                NicModel::cx7().transfer_time(shard * (run.nodes as u64 - 1)).as_secs_f64() * 1e3
            });
            let r = match model_ms {
                Some(mm) => r.with("modelled_inter_node_ms", mm).with("overlap_vs_model", t / ms[2].max(mm)),
                None => r,
            };
            r.with("chosen_path", op.path().name())
                .with("compute_ctas", split.compute)
                .with("push_ctas", split.push)
                .with("spread", split.spread)
                .with("engines", split.engines)
                .with("fwd_ctas", split.fwd)
                .with("chunk_rows", split.chunk_rows)
                .with("join_at", op.join_at())
                .with("tail_tiles", op.tail().count())
                .with("tail_rows", op.tail().rows)
                .with("tail_ranges", op.tail().ranges)
                .with("unfused_ag_copy", ag_copy.as_str())
                .with("unfused_ag_ctas", ag_ctas)
                .with("overlap_efficiency", t / ideal)
        })
        .collect()
}

/// `tune ag-gemm`: for each shape, time the fused path over push CTAs x chunk rows and the
/// unfused path; write the best as the table the op's defaults come from.
pub fn tune(
    shapes: &[GemmShape],
    push: &[u32],
    chunk_rows: &[u32],
    ranks: &RanksArgs,
    (timing, rounds): (Timing, u32),
    out: &FsPath,
) -> anyhow::Result<()> {
    let Some((world, gpu, comm)) = ag_rank(ranks, shapes)? else { return Ok(()) };
    let w = world.world_size as usize;
    let mut lines = Vec::new();
    let bar = harness::progress((shapes.len() * push.len() * chunk_rows.len()) as u64 * rounds as u64, "tune ag-gemm");
    for &s in shapes {
        ensure!(s.m % w == 0, "--shapes: M = {} must be a multiple of the world size {w}", s.m);
        let mut rng = Rng::new(0x7e57 ^ world.rank as u64);
        let a = gpu.upload(&rng.bf16_vec(s.m / w * s.k))?;
        let b: DeviceBuffer<bf16> = gpu.upload(&rng.bf16_vec(s.k * s.n))?;
        let c = gpu.alloc::<bf16>(s.m * s.n)?;
        let mut sweep = Sweep::new();
        for (round, (p, cr)) in Sweep::grid(rounds, push, chunk_rows) {
            let opts = AgGemmOptions { push_ctas: Some(p), chunk_rows: Some(cr), ..Default::default() };
            let op = AgGemm::new(&comm, &gpu, s, BLayout::KN, AgInput::Buffer(&a), &b, Output::Bf16(&c), opts)?;
            let [f, u] = sweep.point(&gpu, &comm, timing, &op, (p, cr))?;
            if world.rank == 0 {
                let label = s.label();
                eprintln!("tune ag-gemm {label} push {p} chunk {cr} round {round}: fused {f:.4} ms, unfused {u:.4} ms");
            }
            bar.inc(1);
        }
        let ((p, cr), fused_ms, unfused_ms, path) = sweep.result()?;
        // Across nodes the entry holds over the transport it was measured over only.
        let transport = (world.nodes > 1).then(|| comm.transport());
        lines.push(serde_json::json!({
            "op": "ag_gemm", "world": world.world_size, "nodes": world.nodes, "m": s.m, "n": s.n, "k": s.k,
            "transport": transport, "push_ctas": p, "chunk_rows": cr, "path": path, "fused_ms": fused_ms,
            "unfused_ms": unfused_ms, "gpu": gpu.info().name, "commit": harness::COMMIT,
        }));
    }
    bar.finish_and_clear();
    crate::cmd_rank::write_tune_table(&world, &lines, out, "ag_gemm")?;
    Ok(())
}
