//! MoE dispatch + grouped GEMM on the command line: the per-rank correctness check the
//! multi-process tests run (`rank-check moe`) and the benchmark (`bench moe`).
use crate::cmd_rank::{
    agreed_seed, alternating_checks, bench_rank, enqueue_copy, enqueue_fill, same_bits, Captured, RepeatArgs, Sweep,
    ALTERNATING_ROUNDS,
};
use crate::trace::TraceArgs;
use crate::RanksArgs;
use anyhow::{bail, ensure, Context};
use half::bf16;
use mkernel::abi::MoeRow;
use mkernel::bench::{harness, RankGroup, RunInfo, Timing};
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::world::World;
use mkernel::gemm::{reference_row_bounded, BLayout, GemmShape};
use mkernel::ops::moe::{reference_rows, MoeDispatchGemm, MoeLayout, MoeOptions, MoeShape};
use mkernel::ops::{Path, PathChoice};
use mkernel::testing::{Rng, POISON_BYTE};
use mkernel::Gpu;
use std::cell::RefCell;
use std::path::Path as FsPath;
use std::time::Duration;

/// How tokens pick their experts.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Routing {
    /// k distinct experts uniformly at random.
    Uniform,
    /// 80% of tokens pick expert 0 (then k - 1 others at random).
    Skewed,
    /// Only every third expert is ever picked (the others get no token).
    Empty,
    /// Every token picks experts 0..k (all tokens on one rank's first experts).
    One,
    /// Every token picks the last k experts (all tokens on the highest ranks), in a slot order
    /// that changes with the token.
    Last,
    /// Token t picks experts `t k .. t k + k` modulo E: every expert gets the same rows when E
    /// divides a rank's tokens times k (whole tile rows at 128: what the padding of uniform
    /// routing costs the grouped GEMM).
    Balanced,
}

/// A MoE problem: tokens per rank x hidden x inter x experts x top-k.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeConfig {
    /// Tokens per rank.
    pub tokens: usize,
    /// The sizes all ranks share.
    pub shape: MoeShape,
}

impl MoeConfig {
    /// Elements of the tokens and this rank's experts' weights at world `w` (`None` on overflow).
    fn operand_elements(&self, w: usize) -> Option<usize> {
        let s = self.shape;
        let x = self.tokens.checked_mul(s.hidden)?;
        x.checked_add(s.local_experts(w).checked_mul(s.hidden)?.checked_mul(s.inter)?)
    }

    fn label(&self) -> String {
        let s = self.shape;
        format!("T{}xH{}xI{}xE{}xk{}", self.tokens, s.hidden, s.inter, s.experts, s.top_k)
    }
}

/// `TxHxIxExk`, e.g. `4096x7168x2048x256x8`.
pub fn config(s: &str) -> Result<MoeConfig, String> {
    let v: Vec<usize> = s
        .split('x')
        .map(|p| p.trim().parse::<usize>().map_err(|_| format!("`{p}` in `{s}` is not a number (want TxHxIxExk)")))
        .collect::<Result<_, _>>()?;
    let [tokens, hidden, inter, experts, top_k] = v[..] else {
        return Err(format!("`{s}`: want five numbers TxHxIxExk (tokens per rank, hidden, inter, experts, top-k)"));
    };
    if hidden == 0 || inter == 0 || experts == 0 || top_k == 0 {
        return Err(format!("`{s}`: hidden, inter, experts and top-k must be at least 1"));
    }
    Ok(MoeConfig { tokens, shape: MoeShape { hidden, inter, experts, top_k } })
}

/// Rank `r`'s routing in round `round`: `[tokens, k]` distinct expert ids and weights.
pub(crate) fn routing(seed: u64, round: u32, r: u32, tokens: usize, s: MoeShape, how: Routing) -> (Vec<i32>, Vec<f32>) {
    let mut rng = Rng::new(seed ^ ((round as u64) << 40) ^ ((r as u64 + 1) * 0x2545_f491_4f6c_dd1d));
    let (e, k) = (s.experts, s.top_k);
    let allowed: Vec<usize> = match how {
        Routing::Empty => (0..e).step_by(3).collect(),
        _ => (0..e).collect(),
    };
    let mut idx = Vec::with_capacity(tokens * k);
    for _ in 0..tokens {
        let mut row: Vec<usize> = Vec::with_capacity(k);
        if how == Routing::One {
            row.extend(0..k);
        } else if how == Routing::Balanced {
            let t = idx.len() / k;
            row.extend((0..k).map(|j| (t * k + j) % e));
        } else if how == Routing::Last {
            let first = rng.next_u32() as usize;
            row.extend((0..k).map(|j| e - 1 - (first + j) % k));
        } else if how == Routing::Skewed && !rng.next_u32().is_multiple_of(5) {
            row.push(0);
        }
        while row.len() < k {
            let c = allowed[rng.next_u32() as usize % allowed.len()];
            if !row.contains(&c) {
                row.push(c);
            }
        }
        idx.extend(row.iter().map(|&x| x as i32));
    }
    let wt = (0..tokens * k).map(|_| rng.uniform()).collect();
    (idx, wt)
}

/// Rank `r`'s tokens in round `round`: column 0 holds the rank, column 1 the token modulo 251
/// (exact in bf16), the rest fresh random values.
fn tokens_of(seed: u64, round: u32, r: u32, tokens: usize, hidden: usize) -> Vec<bf16> {
    let mut rng = Rng::new(seed ^ ((round as u64) << 40) ^ ((r as u64 + 1) * 0x9e37_79b9_7f4a_7c15));
    let mut x = rng.bf16_vec(tokens * hidden);
    for t in 0..tokens {
        x[t * hidden] = bf16::from_f32(r as f32);
        if hidden > 1 {
            x[t * hidden + 1] = bf16::from_f32((t % 251) as f32);
        }
    }
    x
}

/// The role split and granularity knobs of `bench moe` (defaults: [`MoeOptions`]'s).
#[derive(clap::Args, Debug, Clone)]
pub struct Knobs {
    /// CTAs that route and move rows.
    #[arg(long = "pull-ctas", value_parser = clap::value_parser!(u32).range(1..))]
    pub pull_ctas: Option<u32>,
    /// Tokens per x_heap copy item.
    #[arg(long = "chunk-tokens", value_parser = clap::value_parser!(u32).range(1..))]
    pub chunk_tokens: Option<u32>,
    /// Records per pull item.
    #[arg(long = "run-records", value_parser = clap::value_parser!(u32).range(1..))]
    pub run_records: Option<u32>,
    /// Compute CTAs wait for their first tile's rows instead of moving rows meanwhile.
    #[arg(long = "no-helpers")]
    pub no_helpers: bool,
    /// The grouped GEMM reads own tokens where they are (`MoeOptions::gather`).
    #[arg(long)]
    pub gather: bool,
    /// The pull CTAs end with the pull instead of running tiles (`--join false`).
    #[arg(long = "no-join")]
    pub no_join: bool,
    /// Whether the pull CTAs run tiles once the pull is done (`MoeOptions::join`; default: the
    /// tuned table's choice for the nearest measured config, else on).
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new(), conflicts_with = "no_join")]
    pub join: Option<bool>,
    /// One node: the copy engines copy each rank's tokens into its peers' memory, where the
    /// pull CTAs read them (`MoeOptions::engines`; default off).
    #[arg(long, value_parser = clap::builder::BoolishValueParser::new())]
    pub engines: Option<bool>,
    /// Pull items take this rank's own runs first (`MoeOptions::own_first`; default: with the
    /// copy engines).
    #[arg(long = "own-first", value_parser = clap::builder::BoolishValueParser::new())]
    pub own_first: Option<bool>,
    /// The spare warps of the CTAs running tiles move rows beside them
    /// (`MoeOptions::side_pull`; default off).
    #[arg(long = "side-pull", value_parser = clap::builder::BoolishValueParser::new())]
    pub side_pull: Option<bool>,
}

impl Knobs {
    fn options(&self) -> MoeOptions {
        let d = MoeOptions::default();
        MoeOptions {
            pull_ctas: self.pull_ctas,
            chunk_tokens: self.chunk_tokens.unwrap_or(d.chunk_tokens),
            run_records: self.run_records,
            compute_helps: !self.no_helpers,
            gather: self.gather,
            join: if self.no_join { Some(false) } else { self.join },
            engines: self.engines,
            own_first: self.own_first,
            side_pull: self.side_pull.unwrap_or(d.side_pull),
            ..d
        }
    }
}

/// What `rank-check moe` runs.
#[derive(clap::Args, Debug, Clone)]
pub struct CheckArgs {
    /// Tokens per rank x hidden x inter x experts x top-k.
    #[arg(long, value_parser = config, default_value = "300x256x264x8x2")]
    pub config: MoeConfig,
    /// Rank r holds `tokens - r * vary` tokens (ranks holding different counts).
    #[arg(long, default_value_t = 0)]
    pub vary: usize,
    /// How tokens pick experts.
    #[arg(long, value_enum, default_value_t = Routing::Uniform)]
    pub routing: Routing,
    /// Experts' weights layout: kn ([E/W, H, I]) or nk ([E/W, I, H]).
    #[arg(long, value_parser = crate::args::layout, default_value = "kn")]
    pub layout: BLayout,
    /// f32 output instead of bf16.
    #[arg(long)]
    pub f32: bool,
    /// The split and the options, as `bench moe` takes them; runs of 32 records unless given
    /// (the tuned table's runs are for the large configs). With `--gather` own tokens'
    /// dispatched rows are not checked: none is written.
    #[command(flatten)]
    pub knobs: Knobs,
    /// Also check that a bad expert id is a typed error naming the token (rank 0's input).
    #[arg(long = "bad-id")]
    pub bad_id: bool,
    #[command(flatten)]
    pub repeat: RepeatArgs,
    /// Bound on each bootstrap step and device wait.
    #[arg(long = "timeout-ms", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
}

/// `rank-check moe`: fresh rank-encoded tokens and routings, poisoned outputs; the layout row by
/// row against the host's, the dispatched rows bit for bit against their sources, the fused
/// output bit for bit against the unfused path and within the precision contract of an f64 host
/// reference on sampled rows; rounds with new inputs; launches back to back; CUDA graph replays.
pub fn check(world: &World, a: CheckArgs) -> anyhow::Result<()> {
    let gpu = Gpu::new(world.device)?;
    let s = a.config.shape;
    let w = world.world_size as usize;
    gpu.check_fits("--config", a.config.operand_elements(w), 2)?;
    let r = world.rank as usize;
    let t_of = |q: usize| a.config.tokens.saturating_sub(q * a.vary);
    let tokens = t_of(r);
    let el = s.local_experts(w);
    ensure!(s.experts.is_multiple_of(w), "--config: experts must be a multiple of the world size {w}");
    let (h, i, k) = (s.hidden, s.inter, s.top_k);
    let timeout = Duration::from_millis(a.timeout_ms);
    let heap = moe_heap_bytes(w, &a.config);
    let comm = Communicator::new(&gpu, world, CommOptions { heap_bytes: heap, timeout, ..CommOptions::from_env()? })?;
    let seed = agreed_seed(&comm, "rank-check moe")?;
    let x = gpu.alloc::<bf16>((tokens * h).max(1))?;
    let idx = gpu.alloc::<i32>((tokens * k).max(1))?;
    let wt = gpu.alloc::<f32>((tokens * k).max(1))?;
    let mut wrng = Rng::new(seed ^ 0x77 ^ r as u64);
    let w1_host = wrng.bf16_vec(el * h * i);
    let w1 = gpu.upload(&w1_host)?;
    let opts = MoeOptions {
        out_f32: a.f32,
        run_records: Some(a.knobs.run_records.unwrap_or(32)),
        path: PathChoice::Fused,
        timeout,
        ..a.knobs.options()
    };
    let op = MoeDispatchGemm::new(&comm, &gpu, s, a.layout, &x, &idx, &wt, &w1, tokens, opts)?;
    println!(
        "rank {r} of {w}: moe {} tokens here, H {h} I {i} E {} k {k} {:?} {} out, {:?}, roles {:?}{}{}, {} receive rows",
        tokens,
        s.experts,
        a.layout,
        if a.f32 { "f32" } else { "bf16" },
        a.routing,
        op.roles(),
        if op.join() { " (pull CTAs join the tiles)" } else { "" },
        match (op.engines(), op.own_first()) {
            (true, true) => ", copy engines, own runs first",
            (true, false) => ", copy engines",
            (false, true) => ", own runs first",
            _ => "",
        },
        op.capacity_rows()
    );
    let read = || -> anyhow::Result<Vec<f64>> {
        Ok(match (op.output(), op.output_f32()) {
            (Some(o), _) => o.to_vec()?.iter().map(|x| x.to_f64()).collect(),
            (_, Some(o)) => o.to_vec()?.iter().map(|&x| x as f64).collect(),
            _ => bail!("no output"),
        })
    };
    // The outputs and the layout tables: every launch must write all it reads of them.
    let poison = || -> anyhow::Result<()> {
        op.output_bytes().fill_bytes(POISON_BYTE)?;
        op.dispatched().fill_bytes(POISON_BYTE)?;
        let (words, table) = op.layout_tables();
        words.fill_bytes(POISON_BYTE)?;
        table.fill_bytes(POISON_BYTE)?;
        Ok(())
    };
    let load = |round: u32| -> anyhow::Result<()> {
        let (hi, hw) = routing(seed, round, world.rank, tokens, s, a.routing);
        if tokens > 0 {
            x.copy_from(&tokens_of(seed, round, world.rank, tokens, h))?;
            idx.copy_from(&hi)?;
            wt.copy_from(&hw)?;
        }
        poison()
    };
    let mut rng = Rng::new(seed ^ 0x5a5a ^ r as u64);
    // The real rows of the output, in layout order (padding rows are unspecified).
    let real_rows = |lay: &MoeLayout, y: &[f64]| -> Vec<f64> {
        let mut out = Vec::new();
        for (row, info) in lay.rows.iter().enumerate() {
            if info.src_rank >= 0 {
                out.extend_from_slice(&y[row * i..(row + 1) * i]);
            }
        }
        out
    };
    let mut check_round = |round: u32, what: &str| -> anyhow::Result<MoeLayout> {
        let lay = op.layout()?;
        let (topk, weights): (Vec<Vec<i32>>, Vec<Vec<f32>>) =
            (0..w).map(|q| routing(seed, round, q as u32, t_of(q), s, a.routing)).unzip();
        let want = reference_rows(&topk, k, s.experts, r);
        // Counts and offsets.
        let mut counts = vec![0u32; w * el];
        for &(le, src, _, _) in &want {
            counts[src * el + le] += 1;
        }
        ensure!(lay.recv_counts == counts, "rank {r} {what}: recv_counts {:?}, expected {counts:?}", lay.recv_counts);
        let mut off = 0u32;
        for le in 0..el {
            let rows: u32 = (0..w).map(|q| counts[q * el + le]).sum();
            ensure!(
                lay.expert_offsets[le] == off,
                "rank {r} {what}: expert {le} starts at row {}, expected {off}",
                lay.expert_offsets[le]
            );
            ensure!(
                lay.expert_rows[le] == rows,
                "rank {r} {what}: expert {le} has {} rows, expected {rows}",
                lay.expert_rows[le]
            );
            off += rows.div_ceil(128) * 128;
        }
        ensure!(lay.expert_offsets[el] == off, "rank {r} {what}: {} rows used, expected {off}", lay.expert_offsets[el]);
        // Row by row: the table, and the dispatched row's bits against its source.
        let xe = op.dispatched().slice(0..off as usize * h).to_vec()?;
        let sources: Vec<Vec<bf16>> = (0..w).map(|q| tokens_of(seed, round, q as u32, t_of(q), h)).collect();
        let mut it = want.iter();
        let mut copied = 0;
        for le in 0..el {
            let (first, rows) = (lay.expert_offsets[le] as usize, lay.expert_rows[le] as usize);
            for row in first..first + rows.div_ceil(128) * 128 {
                let got = lay.rows[row];
                if row >= first + rows {
                    ensure!(got.src_rank == -1, "rank {r} {what}: padding row {row} names {got:?}");
                    continue;
                }
                let &(_, src, t, j) = it.next().context("more rows than expected")?;
                let exp =
                    MoeRow { src_rank: src as i32, token: t as i32, slot: j as i32, weight: weights[src][t * k + j] };
                ensure!(got == exp, "rank {r} {what}: row {row} (expert {le}) is {got:?}, expected {exp:?}");
                if a.knobs.gather && src == r {
                    continue; // read where it is: no dispatched row
                }
                copied += 1;
                let want_row = &sources[src][t * h..(t + 1) * h];
                let got_row = &xe[row * h..(row + 1) * h];
                if let Some(c) = (0..h).find(|&c| got_row[c].to_bits() != want_row[c].to_bits()) {
                    bail!(
                        "rank {r} {what}: dispatched row {row} column {c} = {} but rank {src} token {t} has {}",
                        got_row[c],
                        want_row[c]
                    );
                }
            }
        }
        // Sampled output rows against the f64 reference.
        let y = read()?;
        let real: Vec<usize> = (0..off as usize).filter(|&row| lay.rows[row].src_rank >= 0).collect();
        let mut worst = 0f64;
        if !real.is_empty() {
            let mut sample = vec![real[0], real[real.len() - 1]];
            sample.extend((0..16).map(|_| real[rng.next_u64() as usize % real.len()]));
            // The last row of up to eight experts: in the expert's last tile row, mostly padding
            // (its tile's other rows are no expert's).
            let tails = (0..el).filter(|&e| lay.expert_rows[e] > 0).take(8);
            sample.extend(tails.map(|e| (lay.expert_offsets[e] + lay.expert_rows[e] - 1) as usize));
            for &row in &sample {
                let info = lay.rows[row];
                let le = (0..el).rev().find(|&e| lay.expert_offsets[e] as usize <= row).unwrap_or(0);
                // The source token itself (not its dispatched copy: with `--gather` own tokens
                // have none).
                let (src, t) = (info.src_rank as usize, info.token as usize);
                let xr = &sources[src][t * h..(t + 1) * h];
                // Expert `le`'s W1 (`[H, I]` or `[I, H]`) and, per column, the exact product and
                // its fp32 accumulation bound on the tensor cores (`reference_row_bounded`).
                let w = &w1_host[le * h * i..(le + 1) * h * i];
                let (exacts, accs) = reference_row_bounded(xr, w, GemmShape { m: 1, n: i, k: h }, a.layout, 0);
                for (c, (&exact, &acc)) in exacts.iter().zip(&accs).enumerate() {
                    let out = y[row * i + c];
                    let u = 2f64.powi(-8);
                    // The fp32 sum is within `acc` of the exact one, and bf16's rounding moves
                    // it by at most u of its size.
                    let bound = if a.f32 { 0.0 } else { u * (exact.abs() + acc) } + acc + 1e-6;
                    let err = (out - exact).abs();
                    ensure!(
                        err.is_finite() && err <= bound,
                        "rank {r} {what}: y[{row}][{c}] (rank {} token {}) = {out} vs exact {exact}: error {err:.3e} beyond {bound:.3e}",
                        info.src_rank,
                        info.token
                    );
                    worst = worst.max(err / bound);
                }
            }
        }
        println!("rank {r} {what}: layout row by row ({} rows), {copied} dispatched rows bit-exact, sampled outputs within the contract (worst error / bound {worst:.2})", real.len());
        Ok(lay)
    };
    for round in 0..a.repeat.rounds {
        load(round)?;
        // The unfused path first (the dispatch alone, then the grouped GEMM alone): a failure of
        // the fused launch then says the pieces work and their overlap does not.
        op.launch_path(&gpu, Path::Unfused)?;
        op.wait(&gpu)?;
        let lay = check_round(round, &format!("round {round} (unfused)"))?;
        let unfused = real_rows(&lay, &read()?);
        poison()?;
        op.launch_path(&gpu, Path::Fused)?;
        op.wait(&gpu)?;
        check_round(round, &format!("round {round} (fused)"))?;
        let fused = real_rows(&lay, &read()?);
        same_bits(world.rank, "y", &fused, &unfused, i)?;
    }
    // More rounds, cycling from launch to launch (tokens and routings staged on the device): a
    // launch that reads rows, records or counts of an earlier one routes or multiplies something
    // else.
    let next = a.repeat.rounds;
    let last = next - 1;
    let staged = (0..ALTERNATING_ROUNDS as u32)
        .map(|which| {
            let (hi, hw) = routing(seed, next + which, world.rank, tokens, s, a.routing);
            let hx = tokens_of(seed, next + which, world.rank, tokens, h);
            Ok((gpu.upload(&hx)?, gpu.upload(&hi)?, gpu.upload(&hw)?))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let (words, table) = op.layout_tables();
    let stage = |which: usize| -> anyhow::Result<()> {
        let (sx, si, sw) = &staged[which];
        // SAFETY: every buffer outlives this function, which waits for the stream before it returns.
        unsafe {
            if tokens > 0 {
                enqueue_copy(&gpu, &x.as_slice(), &sx.as_slice())?;
                enqueue_copy(&gpu, &idx.as_slice(), &si.as_slice())?;
                enqueue_copy(&gpu, &wt.as_slice(), &sw.as_slice())?;
            }
            enqueue_fill(&gpu, &op.output_bytes(), POISON_BYTE)?;
            enqueue_fill(&gpu, &op.dispatched(), POISON_BYTE)?;
            enqueue_fill(&gpu, &words, POISON_BYTE)?;
            enqueue_fill(&gpu, &table, POISON_BYTE)
        }
    };
    let y = Captured::either("y", op.output(), op.output_f32(), i)?;
    let outputs = [y, Captured::of("layout words", &words, 1), Captured::of("row table", &table, 1)];
    // Per round: the rows used, and which of them are real (not padding).
    let real: RefCell<Vec<(usize, Vec<bool>)>> = RefCell::new(vec![Default::default(); ALTERNATING_ROUNDS]);
    let verify = |which: usize, what: &str| -> anyhow::Result<()> {
        let lay = check_round(next + which as u32, what)?;
        real.borrow_mut()[which] = (lay.rows.len(), lay.rows.iter().map(|row| row.src_rank >= 0).collect());
        Ok(())
    };
    // Padding rows of y are unspecified, and the row table past the rows used.
    let unspecified = |which: usize, output: &str, row: usize| {
        let (used, ref is_real) = real.borrow()[which];
        match output {
            "y" => !is_real.get(row).copied().unwrap_or(false),
            "row table" => row >= used,
            _ => false,
        }
    };
    alternating_checks(&gpu, &op, Path::Fused, &a.repeat, 3, &outputs, stage, verify, unspecified)?;
    if a.bad_id {
        comm.barrier()?;
        let (mut hi, _) = routing(seed, last, world.rank, tokens, s, a.routing);
        let bad_token = tokens / 2;
        if world.rank == 0 && tokens > 0 {
            hi[bad_token * k] = s.experts as i32;
            idx.copy_from(&hi)?;
        }
        let got = op.run(&gpu);
        if world.rank == 0 && tokens > 0 {
            let msg = match got {
                Err(e) => e.to_string(),
                Ok(()) => bail!("rank 0: an expert id of {} was accepted", s.experts),
            };
            ensure!(
                msg.contains(&format!("topk_idx[{bad_token}][0] = {}", s.experts)),
                "rank 0: unexpected error: {msg}"
            );
            println!("rank 0: bad expert id reported: {msg}");
        } else {
            got?;
        }
        comm.barrier()?;
    }
    comm.barrier()?;
    println!("moe ok: rank {r} of {w}");
    Ok(())
}

/// One rank of a multi-rank MoE run (bench or tune): world, GPU and a communicator whose heap
/// holds the largest config's buffers.
fn moe_rank(ranks: &RanksArgs, configs: &[MoeConfig]) -> anyhow::Result<Option<(World, Gpu, Communicator)>> {
    let w = |world: &World| world.world_size as usize;
    let elements = |world: &World| configs.iter().map(|c| c.operand_elements(w(world))).collect();
    let heap = |world: &World| configs.iter().map(|c| moe_heap_bytes(w(world), c)).max().unwrap_or(0);
    bench_rank(ranks, "--configs", elements, heap)
}

/// Heap bytes a config's op takes at world `w` (tokens, inboxes, outbox, flags, other nodes'
/// tokens), with room to spare.
fn moe_heap_bytes(w: usize, c: &MoeConfig) -> usize {
    let rows = w * c.tokens * c.shape.hidden * 2;
    let records = w * c.tokens * 4 * (2 + 3 * c.shape.top_k);
    rows + c.tokens * c.shape.hidden * 2 + 2 * records + (64 << 20)
}

/// A config's inputs on this rank: tokens, a routing (uniform by default, as
/// `torch_baselines.py moe`), weights.
struct BenchInputs {
    x: mkernel::gpu::DeviceBuffer<bf16>,
    idx: mkernel::gpu::DeviceBuffer<i32>,
    wt: mkernel::gpu::DeviceBuffer<f32>,
    w1: mkernel::gpu::DeviceBuffer<bf16>,
}

impl BenchInputs {
    fn new(gpu: &Gpu, world: &World, c: &MoeConfig, how: Routing) -> anyhow::Result<Self> {
        let w = world.world_size as usize;
        let s = c.shape;
        ensure!(s.experts.is_multiple_of(w), "--configs: experts must be a multiple of the world size {w}");
        let (idx, wt) = routing(0x5eed, 0, world.rank, c.tokens, s, how);
        let mut rng = Rng::new(0x5eed ^ world.rank as u64);
        Ok(Self {
            x: gpu.upload(&rng.bf16_vec(c.tokens * s.hidden))?,
            idx: gpu.upload(&idx)?,
            wt: gpu.upload(&wt)?,
            w1: gpu.upload(&rng.bf16_vec(s.local_experts(w) * s.hidden * s.inter))?,
        })
    }

    fn op<'a>(
        &'a self,
        comm: &'a Communicator,
        gpu: &Gpu,
        c: &MoeConfig,
        l: BLayout,
        opts: MoeOptions,
    ) -> anyhow::Result<MoeDispatchGemm<'a>> {
        Ok(MoeDispatchGemm::new(comm, gpu, c.shape, l, &self.x, &self.idx, &self.wt, &self.w1, c.tokens, opts)?)
    }
}

/// `bench moe`: fused, unfused (dispatch then GEMM), the grouped GEMM alone (on every SM) and
/// the dispatch alone (the fused launch's pull CTAs), interleaved; the slowest rank's medians.
#[allow(clippy::too_many_arguments)]
pub fn bench(
    configs: &[MoeConfig],
    layouts: &[BLayout],
    how: Routing,
    knobs: &Knobs,
    ranks: &RanksArgs,
    timing: Timing,
    json: Option<&FsPath>,
    trace: &TraceArgs,
) -> anyhow::Result<()> {
    trace.check_one(configs.len() * layouts.len(), "config and one layout")?;
    let Some((world, gpu, comm)) = moe_rank(ranks, configs)? else { return Ok(()) };
    let w = world.world_size as usize;
    let run = RunInfo { gpu: gpu.info().name.clone(), world: world.world_size, nodes: world.nodes };
    let mut group = RankGroup::new(&comm, &gpu, timing.device_barrier)?;
    let mut records = Vec::new();
    for c in configs {
        let s = c.shape;
        let inputs = BenchInputs::new(&gpu, &world, c, how)?;
        for &l in layouts {
            let op = inputs.op(&comm, &gpu, c, l, knobs.options())?;
            op.run(&gpu)?;
            let lay = op.layout()?;
            // Useful work per GPU: the mean over ranks of the rows received (as torch_baselines.py).
            let rows: u64 = lay.expert_rows.iter().map(|&r| r as u64).sum();
            let all = comm.bootstrap().all_gather(&rows.to_le_bytes())?;
            let mean_rows =
                all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as f64).sum::<f64>()
                    / w as f64;
            let flops = 2.0 * mean_rows * s.hidden as f64 * s.inter as f64;
            let mut fused = || op.launch_path(&gpu, Path::Fused);
            let mut unfused = || op.launch_path(&gpu, Path::Unfused);
            let mut gemm = || op.launch_gemm_only(&gpu);
            let mut dispatch = || op.launch_dispatch_only(&gpu);
            let timeline = trace.select(&gpu)?;
            let ms = harness::time_each(
                &gpu,
                &mut group,
                timing,
                &mut [&mut fused, &mut unfused, &mut gemm, &mut dispatch],
            )?;
            op.wait(&gpu)?;
            trace.report(timeline.as_ref(), world.rank, &MOE_ROLES, "")?;
            let ideal = ms[2].max(ms[3]);
            for (imp, &t) in ["mkernel-fused", "mkernel-unfused", "gemm-alone", "dispatch-alone"].iter().zip(&ms) {
                records.push(
                    run.record("moe_dispatch_gemm", c.label(), l.name(), imp, t)
                        .with_flops(flops)
                        .with("fused_over_ideal", ms[0] / ideal)
                        .with("rows_mean", mean_rows)
                        .with("pull_ctas", op.roles().intra_comm)
                        .with("run_records", op.run_records())
                        .with("helpers", op.compute_helps())
                        .with("gather", knobs.gather)
                        .with("engines", op.engines())
                        .with("own_first", op.own_first())
                        .with("side_pull", op.side_pull())
                        .with("routing", format!("{how:?}").to_lowercase())
                        .with("chunk_tokens", knobs.options().chunk_tokens)
                        .timed_with(timing),
                );
            }
        }
    }
    if world.rank == 0 {
        println!(
            "moe dispatch + grouped GEMM, {} ranks, slowest rank's median of {} launches (TFLOP/s per GPU: mean rows received)",
            world.world_size, timing.reps
        );
        harness::print_table(&records, Some("mkernel-fused"));
        if let Some(path) = json {
            harness::write_json(path, &records).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}

/// The roles' names in a timeline's summary, by `sched::Role`'s values.
const MOE_ROLES: [&str; 2] = ["compute", "router / pull"];

/// `tune moe`: pull CTAs x records per run x whether the pull CTAs join the tiles, fused against
/// unfused, per config; writes the table the per-config defaults come from
/// (`host/ops/tuned/moe.jsonl`).
pub fn tune(
    configs: &[MoeConfig],
    (pull, runs, joins): (&[u32], &[u32], &[bool]),
    ranks: &RanksArgs,
    (timing, rounds): (Timing, u32),
    out: &FsPath,
) -> anyhow::Result<()> {
    let Some((world, gpu, comm)) = moe_rank(ranks, configs)? else { return Ok(()) };
    let mut lines = Vec::new();
    let points = (configs.len() * pull.len() * runs.len() * joins.len()) as u64 * rounds as u64;
    let bar = harness::progress(points, "tune moe");
    for c in configs {
        // Tuned on the routing the defaults serve (uniform, as `torch_baselines.py moe`).
        let inputs = BenchInputs::new(&gpu, &world, c, Routing::Uniform)?;
        let mut sweep = Sweep::new();
        // Rounds outermost, as `Sweep::grid`, with the join innermost.
        let grid = Sweep::grid(rounds, pull, runs).flat_map(|(round, pr)| joins.iter().map(move |&j| (round, pr, j)));
        for (round, (p, r), join) in grid {
            let opts = MoeOptions { pull_ctas: Some(p), run_records: Some(r), join: Some(join), ..Default::default() };
            let op = inputs.op(&comm, &gpu, c, BLayout::KN, opts)?;
            let [f, u] = sweep.point(&gpu, &comm, timing, &op, (p, r, join))?;
            if world.rank == 0 {
                let label = c.label();
                eprintln!(
                    "tune moe {label} pull {p} run {r} join {join} round {round}: fused {f:.4} ms, unfused {u:.4} ms"
                );
            }
            bar.inc(1);
        }
        let ((p, r, join), fused_ms, unfused_ms, path) = sweep.result()?;
        let s = c.shape;
        lines.push(serde_json::json!({
            "op": "moe", "world": world.world_size, "nodes": world.nodes, "tokens": c.tokens, "hidden": s.hidden,
            "inter": s.inter, "experts": s.experts, "top_k": s.top_k, "pull_ctas": p, "run_records": r, "join": join,
            "path": path, "fused_ms": fused_ms,
            "unfused_ms": unfused_ms, "gpu": gpu.info().name, "commit": harness::COMMIT,
        }));
    }
    bar.finish_and_clear();
    crate::cmd_rank::write_tune_table(&world, &lines, out, "moe")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routings_pick_distinct_experts_as_documented() {
        for (e, k) in [(32, 4), (48, 3), (64, 16), (16, 16)] {
            let s = MoeShape { hidden: 128, inter: 64, experts: e, top_k: k };
            for how in
                [Routing::Uniform, Routing::Skewed, Routing::Empty, Routing::One, Routing::Last, Routing::Balanced]
            {
                if how == Routing::Empty && e.div_ceil(3) < k {
                    continue; // fewer experts allowed than a token picks
                }
                let (idx, wt) = routing(7, 1, 3, 40, s, how);
                assert_eq!((idx.len(), wt.len()), (40 * k, 40 * k));
                let mut leading_slots = std::collections::BTreeSet::new();
                let mut balanced = std::collections::BTreeMap::new();
                for row in idx.chunks(k) {
                    let mut ids: Vec<i32> = row.to_vec();
                    ids.sort();
                    ids.dedup();
                    assert_eq!(ids.len(), k, "{how:?}: {row:?} repeats an expert");
                    assert!(ids.iter().all(|&x| (0..e as i32).contains(&x)), "{how:?}: {row:?}");
                    match how {
                        Routing::Empty => assert!(ids.iter().all(|x| x % 3 == 0), "{row:?}"),
                        Routing::One => assert_eq!(ids, (0..k as i32).collect::<Vec<_>>()),
                        Routing::Last => assert_eq!(ids, ((e - k) as i32..e as i32).collect::<Vec<_>>()),
                        _ => {}
                    }
                    if how == Routing::Balanced {
                        for &x in row {
                            *balanced.entry(x).or_insert(0) += 1;
                        }
                    }
                    leading_slots.insert(row.iter().position(|&x| x == ids[0]));
                }
                if how == Routing::Balanced && (40 * k).is_multiple_of(e) {
                    // Every expert the same number of tokens.
                    assert_eq!(balanced.len(), e, "{balanced:?}");
                    assert!(balanced.values().all(|&n| n == 40 * k / e), "{balanced:?}");
                }
                if how == Routing::Last && k > 1 {
                    // The lowest expert moves between slots, so the kernel's leading slot does.
                    assert!(leading_slots.len() > 1, "{leading_slots:?}");
                }
            }
        }
    }
}
