//! `mkernel rank-check ring-attention` and `mkernel bench ring-attention`.
use crate::cmd_rank::{bench_rank, enqueue_copy, enqueue_fill, Captured, History, ALTERNATING_ROUNDS};
use crate::RanksArgs;
use anyhow::{ensure, Context};
use clap::Args;
use half::bf16;
use mkernel::attention::{index, reference_row, Attention, AttentionOptions, AttentionShape, AttnLayout};
use mkernel::bench::{harness, RunInfo, Timing};
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::transport::NicModel;
use mkernel::comm::world::World;
use mkernel::ops::ring_attention::{shard_position, zigzag_shard, RingAttention, RingOptions};
use mkernel::testing::{rel_err, Rng, POISON_BYTE};
use mkernel::Gpu;
use std::path::Path;
use std::time::Duration;

/// `rank-check ring-attention`.
#[derive(Args, Debug)]
pub struct CheckArgs {
    /// This rank's shard: BxHxSxD (batch, heads, rows per rank, head dim).
    #[arg(long, value_parser = crate::args::attention, default_value = "2x4x300x128")]
    pub config: AttentionShape,
    /// Key/value heads (divides the heads; default: as many).
    #[arg(long = "heads-kv")]
    pub heads_kv: Option<usize>,
    /// Layout: bhsd or bshd.
    #[arg(long, value_parser = crate::args::attn_layout, default_value = "bhsd")]
    pub layout: AttnLayout,
    /// Causal mask (zigzag shards).
    #[arg(long)]
    pub causal: bool,
    /// Receive slots (default: one per step after the first, W - 1).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
    pub slots: Option<u32>,
    /// Tiles walked one step per unit (default: modelled; 0: every tile one unit over all steps).
    #[arg(long = "split-tiles")]
    pub split_tiles: Option<u32>,
    /// Launches back to back (no host sync) after the checked rounds, cycling through their
    /// inputs; each must give its round's bits.
    #[arg(long, default_value_t = 20)]
    pub repeat: u32,
    /// Query rows per (batch, head) checked against the f64 host reference.
    #[arg(long = "reference-rows", default_value_t = 24)]
    pub reference_rows: usize,
    /// Bound on each bootstrap step and device wait.
    #[arg(long = "timeout-ms", default_value_t = 20_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_ms: u64,
}

/// Every rank makes the whole sequence's Q, K and V from one seed (the same on every rank), takes
/// its shard, runs the ring (poisoned outputs), and checks its rows against the single-GPU kernel
/// on the whole sequence (on this rank's GPU) and, on sampled rows, against the f64 reference; so
/// for each of [`ALTERNATING_ROUNDS`] rounds of fresh data. Then launches back to back cycle
/// through the rounds, each launch's inputs written on the stream right after the launch before
/// ends, and each launch's O and lse must be its round's bits: a launch that read a K/V block a
/// peer (or the proxy) took late, or one left by an earlier launch, computes something else.
pub fn check(a: CheckArgs) -> anyhow::Result<()> {
    let world = World::from_env()?;
    let gpu = Gpu::new(world.device)?;
    let (w, rank) = (world.world_size as usize, world.rank as usize);
    let local = AttentionShape { heads_kv: a.heads_kv.unwrap_or(a.config.heads), ..a.config };
    let full = AttentionShape { seq_q: local.seq_q * w, seq_k: local.seq_k * w, ..local };
    let timeout = Duration::from_millis(a.timeout_ms);
    let opts =
        RingOptions { causal: a.causal, slots: a.slots, split_tiles: a.split_tiles, timeout, ..Default::default() };
    let heap = RingAttention::heap_bytes(local, world.world_size, &opts);
    let comm = Communicator::new(&gpu, &world, CommOptions { heap_bytes: heap, ..CommOptions::from_env()? })?;
    let zigzag = opts.causal && opts.zigzag;
    // One seed for all ranks (agreed through the bootstrap), fresh per run.
    let proposal = Rng::fresh("ring-attention").next_u64().to_le_bytes();
    let all = comm.bootstrap().all_gather(&proposal)?;
    let seed = u64::from_le_bytes(all[0][..8].try_into().context("rank 0's seed")?);
    let mut rng = Rng::new(seed);
    // Sampled rows from a generator of their own: the data stay the same on every rank.
    let mut pick = Rng::new(seed ^ 0x5a3c_96e1);
    let dims = |heads| (full.batch, full.seq_q, heads, full.head_dim);
    let mine = |x: &[bf16], heads| zigzag_shard(x, a.layout, dims(heads), (w, rank), zigzag);

    let dq = gpu.alloc::<bf16>(local.q_elements())?;
    let o = gpu.alloc::<bf16>(local.q_elements())?;
    let lse = gpu.alloc::<f32>(local.lse_elements())?;
    let ring = RingAttention::new(&comm, &gpu, local, a.layout, &dq, &o, Some(&lse), opts)?;
    let single_opts = AttentionOptions { causal: a.causal, timeout, ..Default::default() };
    let d = local.head_dim;
    let scale = 1.0 / (d as f64).sqrt();
    let (mut worst, mut worst_lse, mut worst_ref) = (0f64, 0f64, 0f64);
    // Each round's shards (uploaded, for the launches back to back) and verified O and lse.
    let mut rounds = Vec::new();
    for round in 0..ALTERNATING_ROUNDS {
        let (q, k, v) =
            (rng.bf16_vec(full.q_elements()), rng.bf16_vec(full.kv_elements()), rng.bf16_vec(full.kv_elements()));
        let (q_r, k_r, v_r) = (mine(&q, full.heads), mine(&k, full.heads_kv), mine(&v, full.heads_kv));
        // Every rank's launch of the round before has ended: nobody reads our K/V any more.
        comm.barrier()?;
        dq.copy_from(&q_r)?;
        ring.k().copy_from(&k_r)?;
        ring.v().copy_from(&v_r)?;
        o.fill_bytes(POISON_BYTE)?;
        lse.fill_bytes(POISON_BYTE)?;
        comm.barrier()?;
        ring.run(&gpu)?;
        let (got, got_lse) = (o.to_vec()?, lse.to_vec()?);
        ensure!(
            got.iter().all(|x| x.to_f32().is_finite()),
            "rank {rank}: round {round}: O has unwritten (NaN) elements"
        );
        ensure!(got_lse.iter().all(|x| !x.is_nan()), "rank {rank}: round {round}: lse has unwritten (NaN) elements");

        // The single-GPU kernel on the whole sequence, on this GPU.
        let (fq, fk, fv) = (gpu.upload(&q)?, gpu.upload(&k)?, gpu.upload(&v)?);
        let (fo, flse) = (gpu.alloc::<bf16>(full.q_elements())?, gpu.alloc::<f32>(full.lse_elements())?);
        Attention::new(&gpu, full, a.layout, (&fq, &fk, &fv), &fo, Some(&flse), single_opts)?.run(&gpu)?;
        let (want, want_lse) = (fo.to_vec()?, flse.to_vec()?);
        for b in 0..local.batch {
            for h in 0..local.heads {
                for x in 0..local.seq_q {
                    let pos = shard_position(x, local.seq_q, (w, rank), zigzag);
                    let row = |buf: &[bf16], seq, r| -> Vec<f64> {
                        (0..d).map(|e| buf[index(a.layout, (b, h, r, e), seq, local.heads, d)].to_f64()).collect()
                    };
                    let (mine_row, theirs) = (row(&got, local.seq_q, x), row(&want, full.seq_q, pos));
                    let err = rel_err(&mine_row, &theirs);
                    let l_err = (got_lse[(b * local.heads + h) * local.seq_q + x]
                        - want_lse[(b * full.heads + h) * full.seq_q + pos])
                        .abs();
                    ensure!(
                        err < 1e-2 && l_err < 2e-3,
                        "rank {rank}: round {round}: b {b} h {h} row {x} (position {pos}): O rel err {err:.2e} vs the single-GPU kernel, lse off by {l_err:.2e}"
                    );
                    worst = worst.max(err);
                    worst_lse = worst_lse.max(l_err as f64);
                }
                let rows: Vec<usize> = (0..a.reference_rows.min(local.seq_q))
                    .map(|i| if i < 2 { i * (local.seq_q - 1) } else { pick.next_u64() as usize % local.seq_q })
                    .collect();
                for x in rows {
                    let pos = shard_position(x, local.seq_q, (w, rank), zigzag);
                    let (r, _) = reference_row((&q, &k, &v), full, a.layout, a.causal, scale, (b, h, pos));
                    let mine_row: Vec<f64> = (0..d)
                        .map(|e| got[index(a.layout, (b, h, x, e), local.seq_q, local.heads, d)].to_f64())
                        .collect();
                    let err = rel_err(&mine_row, &r);
                    ensure!(
                        err < 1e-2,
                        "rank {rank}: round {round}: b {b} h {h} row {x} (position {pos}): O rel err {err:.2e} vs the f64 reference"
                    );
                    worst_ref = worst_ref.max(err);
                }
            }
        }
        let shards = (gpu.upload(&q_r)?, gpu.upload(&k_r)?, gpu.upload(&v_r)?);
        // The verified O and lse, as `History` holds a launch's outputs.
        let verified = [bytemuck::cast_slice::<bf16, u8>(&got), bytemuck::cast_slice::<f32, u8>(&got_lse)].concat();
        rounds.push((shards, verified));
    }
    // Back to back, no host sync: launch n takes round n mod 3's inputs, written on the stream
    // after the launch before (poisoned outputs too); a device copy of its O and lse follows it.
    // As many launches as `CAPTURE_BUDGET` holds copies of run between host waits.
    comm.barrier()?;
    let outputs = [Captured::of("O", &o.as_slice(), d), Captured::of("lse", &lse.as_slice(), local.seq_q)];
    let history = History::new(&gpu, &outputs, a.repeat as usize, 1)?;
    history.back_to_back(
        &gpu,
        a.repeat as usize,
        |n| {
            let ((q_r, k_r, v_r), _) = &rounds[n % ALTERNATING_ROUNDS];
            // SAFETY: every buffer here (outputs, Q, the op's K/V, the rounds' uploads) outlives
            // the wait that ends each batch.
            unsafe {
                enqueue_fill(&gpu, &o.as_slice(), POISON_BYTE)?;
                enqueue_fill(&gpu, &lse.as_slice(), POISON_BYTE)?;
                enqueue_copy(&gpu, &dq.as_slice(), &q_r.as_slice())?;
                enqueue_copy(&gpu, &ring.k(), &k_r.as_slice())?;
                enqueue_copy(&gpu, &ring.v(), &v_r.as_slice())?;
            }
            Ok(ring.launch(&gpu)?)
        },
        || Ok(ring.wait(&gpu)?),
        |n, slot| {
            let round = n % ALTERNATING_ROUNDS;
            let what = format!("rank {rank}: back-to-back launch {n} (round {round} of {ALTERNATING_ROUNDS})");
            history.compare(slot, &rounds[round].1, |_, _| false, &what, "the round's verified launch wrote")
        },
    )?;
    comm.barrier()?;
    println!(
        "ring-attention ok: rank {rank} of {w} ({} node(s)), shard {:?} {:?} causal {} zigzag {zigzag}: {ALTERNATING_ROUNDS} rounds vs single-GPU worst row rel err {worst:.2e}, lse {worst_lse:.2e}; vs f64 reference {worst_ref:.2e}; {} back-to-back launches on alternating inputs identical to their rounds'",
        world.nodes, local, a.layout, a.causal, a.repeat
    );
    Ok(())
}

/// `bench ring-attention`: the ring (slowest rank's median, a barrier before each launch) and,
/// on the same GPU, the single-GPU kernel on one rank's block (the per-GPU rate the ring should
/// keep), per config and mask.
pub fn bench(
    configs: &[AttentionShape],
    masks: &[bool],
    (comm_ctas, slots, split_tiles): (Option<u32>, Option<u32>, Option<u32>),
    ranks: &RanksArgs,
    timing: Timing,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let opts = |causal| RingOptions { causal, comm_ctas, slots, split_tiles, ..Default::default() };
    let Some((world, gpu, comm)) = bench_rank(
        ranks,
        "configs",
        |_| configs.iter().map(|c| Some(6 * c.q_elements())).collect(),
        // One op at a time: the largest config's (its region is freed before the next's).
        |w| configs.iter().map(|&c| RingAttention::heap_bytes(c, w.world_size, &opts(false))).max().unwrap_or(0),
    )?
    else {
        return Ok(());
    };
    let run = RunInfo { gpu: gpu.info().name.clone(), world: world.world_size, nodes: world.nodes };
    let mut records = Vec::new();
    for &s in configs {
        s.validate().with_context(|| format!("--configs {}", s.label()))?;
        for &causal in masks {
            let mut rng = Rng::new(0x717e ^ world.rank as u64);
            let q = gpu.upload(&rng.bf16_vec(s.q_elements()))?;
            let o = gpu.alloc::<bf16>(s.q_elements())?;
            let lse = gpu.alloc::<f32>(s.lse_elements())?;
            let ring = RingAttention::new(&comm, &gpu, s, AttnLayout::Bhsd, &q, &o, Some(&lse), opts(causal))?;
            ring.k().copy_from(&rng.bf16_vec(s.kv_elements()))?;
            ring.v().copy_from(&rng.bf16_vec(s.kv_elements()))?;
            // One rank's block alone on this GPU (causal: the diagonal block's mask), timed
            // interleaved with the ring so both see the same clocks (the power limit's transient
            // moved a separately timed reference by up to 13% within one call).
            let (k, v) = (gpu.upload(&rng.bf16_vec(s.kv_elements()))?, gpu.upload(&rng.bf16_vec(s.kv_elements()))?);
            let one = Attention::new(
                &gpu,
                s,
                AttnLayout::Bhsd,
                (&q, &k, &v),
                &o,
                Some(&lse),
                AttentionOptions { causal, ..Default::default() },
            )?;
            // Also the block `world` times back to back: as much work and as long as the ring,
            // so both meet the power limit's clock transient alike (it pulls the clock down over
            // the first milliseconds of a burst; a launch half as long averages a higher clock).
            let blocks = world.world_size;
            let (mut ring_run, mut one_run) = (|| ring.launch(&gpu), || one.launch(&gpu));
            let mut blocks_run = || (0..blocks).try_for_each(|_| one.launch(&gpu));
            let ms = harness::time_each(&gpu, &mut &comm, timing, &mut [&mut ring_run, &mut one_run, &mut blocks_run])?;
            let (ms, one_ms, blocks_ms) = (ms[0], ms[1], ms[2]);
            ring.wait(&gpu)?;
            one.run(&gpu)?;
            let ring_tf = ring.flops_per_rank() / ms / 1e9;
            let one_tf = s.flops(causal) / one_ms / 1e9;
            let blocks_tf = blocks as f64 * s.flops(causal) / blocks_ms / 1e9;
            let mask = if causal { "bhsd/causal" } else { "bhsd" };
            let mut record = run.record("ring_attention", s.label(), mask, "mkernel", ms);
            if world.nodes > 1 {
                // Across nodes each of the W - 1 sends crosses a modelled NIC link one after the
                // other, and the last step's attention can start only when its K/V is in: the
                // ring takes at least (W - 1) link times plus one step, and at least the blocks'
                // own time.
                let link_ms = NicModel::cx7().transfer_time(ring.step_bytes()).as_secs_f64() * 1e3;
                let bound = blocks_ms.max((blocks - 1) as f64 * link_ms + blocks_ms / blocks as f64);
                record = record.with("modelled_link_ms", link_ms).with("ring_vs_model", ms / bound);
            }
            records.push(
                record
                    .with_flops(ring.flops_per_rank())
                    .with("one_block_ms", one_ms)
                    .with("one_block_tflops", one_tf)
                    .with("ring_vs_one_block", ring_tf / one_tf)
                    .with("blocks_back_to_back_ms", blocks_ms)
                    .with("blocks_back_to_back_tflops", blocks_tf)
                    .with("ring_vs_blocks_back_to_back", ring_tf / blocks_tf)
                    .with("ctas", format!("{:?}", ring.ctas()))
                    .with("slots", ring.slots())
                    .with("split_tiles", format!("{:?}", ring.split_tiles())),
            );
            comm.barrier()?;
        }
    }
    if world.rank == 0 {
        println!(
            "ring attention, {} ranks on {} node(s), per-rank shard BxHxSxD; slowest rank's median of {} launches; TFLOP/s per GPU (torch_baselines.py ring's count)",
            world.world_size, world.nodes, timing.reps
        );
        harness::print_table(&records, None);
        for r in &records {
            let x = |k: &str| r.extra[k].as_f64().unwrap_or(0.0);
            println!(
                "  {} {}: ring {:.1} TFLOP/s per GPU, one block alone {:.1} -> {:.3}x, {} blocks back to back {:.1} -> {:.3}x",
                r.shape,
                r.layout,
                r.tflops.unwrap_or(0.0),
                x("one_block_tflops"),
                x("ring_vs_one_block"),
                world.world_size,
                x("blocks_back_to_back_tflops"),
                x("ring_vs_blocks_back_to_back")
            );
            if let Some(v) = r.extra.get("ring_vs_model").and_then(|v| v.as_f64()) {
                println!(
                    "    time / max(blocks back to back, {} link times of {:.3} ms + one step) = {v:.3}",
                    world.world_size - 1,
                    x("modelled_link_ms")
                );
            }
        }
        if let Some(path) = json {
            harness::write_json(path, &records).with_context(|| format!("writing {}", path.display()))?;
        }
    }
    Ok(())
}
