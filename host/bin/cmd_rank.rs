//! `mkernel launch`, running a multi-rank command as ranks, and `mkernel rank-check`.
use crate::{CopyArg, LaunchArgs, RankCheckCmd, RanksArgs};
use anyhow::{bail, ensure, Context};
use bytemuck::Pod;
use mkernel::bench::{harness, Timing};
use mkernel::comm::bootstrap::Bootstrap;
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::launch::{launch as launch_ranks, LaunchSpec};
use mkernel::comm::world::World;
use mkernel::gpu::{DeviceBuffer, DeviceSlice};
use mkernel::ops::allgather::{AllGather, AllGatherOptions, NvlinkCopy};
use mkernel::ops::{Path, TwoPathOp};
use mkernel::Gpu;
use std::marker::PhantomData;
use std::time::Duration;

/// `mkernel launch -n N [--nodes K] [--gpus a,b,..] [--timeout-s T] [--] PROGRAM ARGS..`
pub fn launch(a: LaunchArgs) -> anyhow::Result<()> {
    let (program, args) = a.command.split_first().context("no program to launch")?;
    let spec = LaunchSpec {
        nprocs: a.nprocs,
        nodes: a.nodes,
        gpus: a.gpus,
        program: program.clone(),
        args: args.to_vec(),
        env: Vec::new(),
        timeout: Duration::from_secs(a.timeout_s),
    };
    Ok(launch_ranks(&spec)?)
}

/// A multi-rank command either runs as one rank of an outer `mkernel launch` (RANK is set) or
/// starts its own ranks: the same command line, under the launcher, on `--world` GPUs (default:
/// every GPU here). Returns the world when this process is a rank, `None` when it launched them
/// (and they all succeeded).
pub fn as_rank(ranks: &RanksArgs) -> anyhow::Result<Option<World>> {
    if std::env::var_os("RANK").is_some() {
        let world = World::from_env()?;
        if let Some(w) = ranks.world {
            ensure!(w == world.world_size, "--world {w} but WORLD_SIZE is {}", world.world_size);
        }
        ensure!(
            ranks.nodes == 1 || ranks.nodes == world.nodes,
            "--nodes {} but the launcher formed {} nodes",
            ranks.nodes,
            world.nodes
        );
        return Ok(Some(world));
    }
    let world = match ranks.world {
        Some(w) => w,
        None => mkernel::gpu::device_count()?.max(1),
    };
    ensure!(world % ranks.nodes == 0, "--nodes {} must divide the {world} ranks", ranks.nodes);
    let spec = LaunchSpec {
        nprocs: world,
        nodes: ranks.nodes,
        gpus: None,
        program: std::env::current_exe()?.into(),
        args: std::env::args_os().skip(1).collect(),
        env: Vec::new(),
        timeout: Duration::from_secs(1800),
    };
    launch_ranks(&spec)?;
    Ok(None)
}

impl From<CopyArg> for NvlinkCopy {
    fn from(c: CopyArg) -> Self {
        match c {
            CopyArg::Bulk => NvlinkCopy::Bulk,
            CopyArg::Lsu => NvlinkCopy::Lsu,
            CopyArg::Fan => NvlinkCopy::Fan,
            CopyArg::Pull => NvlinkCopy::Pull,
            CopyArg::Ce => NvlinkCopy::CopyEngine,
            CopyArg::Auto => NvlinkCopy::Auto,
        }
    }
}

/// Payload byte `i` of rank `r`'s shard in round `it`: encodes the source rank.
pub fn pattern(r: u32, it: u32, i: usize) -> u8 {
    let x = (i as u32).wrapping_mul(2_654_435_761) ^ it.wrapping_mul(40503) ^ r.wrapping_mul(0x9e37);
    ((x >> 13) as u8) ^ (r as u8).wrapping_mul(31)
}

/// `mkernel rank-check ...` (run as one rank, under `mkernel launch`).
/// A seed every rank agrees on (rank 0's), from `MKERNEL_SEED` or the clock, printed by rank 0 as
/// `{name}: seed N` so that a failing check can be replayed.
pub fn agreed_seed(comm: &Communicator, name: &str) -> anyhow::Result<u64> {
    let mine = match std::env::var("MKERNEL_SEED") {
        Ok(v) => v.parse().context("MKERNEL_SEED must be a number")?,
        Err(_) => std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?.as_nanos() as u64,
    };
    let all = comm.bootstrap().all_gather(&mine.to_le_bytes())?;
    let seed = u64::from_le_bytes(all[0][..8].try_into()?);
    if comm.world().rank == 0 {
        println!("{name}: seed {seed} (replay with MKERNEL_SEED={seed})");
    }
    Ok(seed)
}

/// The two paths of a fused op computed `a` and `b` (row-major, `cols` wide) from the same inputs:
/// they must agree bit for bit; the error names the first element that does not.
pub fn same_bits(rank: u32, what: &str, a: &[f64], b: &[f64], cols: usize) -> anyhow::Result<()> {
    ensure!(a.len() == b.len(), "rank {rank}: {what} has {} elements on one path, {} on the other", a.len(), b.len());
    match a.iter().zip(b).position(|(x, y)| x.to_bits() != y.to_bits()) {
        Some(i) => {
            bail!("rank {rank}: {what}[{}][{}] differs between the paths: {} vs {}", i / cols, i % cols, a[i], b[i])
        }
        None => Ok(()),
    }
}

/// How often a two-path op's rank-check runs it: the options every such check shares.
#[derive(clap::Args, Debug, Clone)]
pub struct RepeatArgs {
    /// Rounds with fresh inputs (no barrier between them).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..))]
    pub rounds: u32,
    /// Launches back to back (no host synchronisation but between batches of what the checks'
    /// copies of their outputs hold), inputs cycling through verified rounds.
    #[arg(long = "back-to-back", default_value_t = 100, value_parser = clap::value_parser!(u32).range(0..))]
    pub back_to_back: u32,
    /// Also capture launches into a CUDA graph and check its replays.
    #[arg(long)]
    pub graph: bool,
}

/// One output a launch writes, as [`alternating_checks`] copies it out after each launch and
/// names a differing element (row and column of a row-major matrix `cols` wide).
pub struct Captured<'a> {
    name: &'static str,
    addr: u64,
    bytes: usize,
    elem: usize,
    cols: usize,
    _borrow: PhantomData<&'a ()>,
}

impl<'a> Captured<'a> {
    /// The whole of `s`, a row-major matrix `cols` wide, called `name` in a failure.
    pub fn of<T: Pod>(name: &'static str, s: &DeviceSlice<'a, T>, cols: usize) -> Self {
        let elem = std::mem::size_of::<T>();
        Captured { name, addr: s.addr(), bytes: s.len() * elem, elem, cols: cols.max(1), _borrow: PhantomData }
    }

    /// An op's output that is bf16 or f32 (the one present), as [`Captured::of`].
    pub fn either(
        name: &'static str,
        bf16: Option<DeviceSlice<'a, half::bf16>>,
        f32: Option<DeviceSlice<'a, f32>>,
        cols: usize,
    ) -> anyhow::Result<Self> {
        match (bf16, f32) {
            (Some(o), _) => Ok(Captured::of(name, &o, cols)),
            (_, Some(o)) => Ok(Captured::of(name, &o, cols)),
            _ => bail!("no output"),
        }
    }
}

/// Enqueue `byte` into every byte of `s` on `gpu`'s stream (no host wait).
///
/// # Safety
/// `s`'s memory stays allocated until the stream has run the fill (the rank-checks free their
/// buffers only after waiting for their stream).
pub unsafe fn enqueue_fill<T: Pod>(gpu: &Gpu, s: &DeviceSlice<'_, T>, byte: u8) -> anyhow::Result<()> {
    // SAFETY: the range is `s`'s, alive until the fill ran (this function's contract).
    Ok(unsafe { gpu.fill_async(s.addr(), byte, s.len() * std::mem::size_of::<T>()) }?)
}

/// Enqueue a copy of `src` into `dst` (the same length) on `gpu`'s stream (no host wait).
///
/// # Safety
/// As [`enqueue_fill`], for both slices.
pub unsafe fn enqueue_copy<T: Pod>(
    gpu: &Gpu,
    dst: &DeviceSlice<'_, T>,
    src: &DeviceSlice<'_, T>,
) -> anyhow::Result<()> {
    ensure!(dst.len() == src.len(), "copy of {} elements into {}", src.len(), dst.len());
    if src.is_empty() {
        return Ok(());
    }
    // SAFETY: both ranges are the slices', alive until the copy ran (this function's contract).
    Ok(unsafe { gpu.copy_async(dst.addr(), src.addr(), src.len() * std::mem::size_of::<T>()) }?)
}

/// Device memory the alternating checks may hold for the launches' copied outputs; more launches
/// than fit run in batches with a host wait between them.
pub const CAPTURE_BUDGET: usize = 2 << 30;

/// Rounds the alternating checks cycle through: three, so that a launch reading what the launch
/// two before it left (a buffer kept per launch parity) sees other inputs too.
pub const ALTERNATING_ROUNDS: usize = 3;

/// Device copies of a launch's `outputs`, room for several launches (slots), for the checks of
/// launches run back to back: the two-path ops' [`alternating_checks`], the all-gather's and ring
/// attention's rank-checks.
pub struct History<'o, 'a> {
    outputs: &'o [Captured<'a>],
    size: usize,
    slots: usize,
    buf: DeviceBuffer<u8>,
}

impl<'o, 'a> History<'o, 'a> {
    /// Room for `wanted` launches' copies, or fewer as [`CAPTURE_BUDGET`] allows, but `min` at least.
    pub fn new(gpu: &Gpu, outputs: &'o [Captured<'a>], wanted: usize, min: usize) -> anyhow::Result<Self> {
        let size = outputs.iter().map(|o| o.bytes).sum::<usize>();
        let slots = wanted.max(min).min((CAPTURE_BUDGET / size.max(1)).max(min));
        Ok(History { outputs, size, slots, buf: gpu.alloc::<u8>(slots * size)? })
    }

    /// Enqueue the copy of every output into `slot` on `gpu`'s stream.
    pub fn capture(&self, gpu: &Gpu, slot: usize) -> anyhow::Result<()> {
        let mut at = self.buf.addr() + (slot * self.size) as u64;
        for o in self.outputs {
            // SAFETY: `o` borrows a live output (`Captured`'s lifetime) and the slot is inside
            // `buf`, which lives as long as `self`; callers wait for the stream before either goes.
            unsafe { gpu.copy_async(at, o.addr, o.bytes) }?;
            at += o.bytes as u64;
        }
        Ok(())
    }

    /// What `slot` holds (after the stream ran its copies).
    pub fn bytes(&self, slot: usize) -> anyhow::Result<Vec<u8>> {
        Ok(self.buf.slice(slot * self.size..(slot + 1) * self.size).to_vec()?)
    }

    /// `slot` must equal `want` (the outputs' bytes in order) bit for bit, but for the rows that
    /// `unspecified(output name, row)` names; a failure names the launch (`what`), the element,
    /// and its bytes against `reference`'s.
    pub fn compare(
        &self,
        slot: usize,
        want: &[u8],
        unspecified: impl Fn(&str, usize) -> bool,
        what: &str,
        reference: &str,
    ) -> anyhow::Result<()> {
        let got = self.bytes(slot)?;
        let mut base = 0;
        for o in self.outputs {
            let (g, w) = (&got[base..base + o.bytes], &want[base..base + o.bytes]);
            base += o.bytes;
            let row_bytes = o.elem * o.cols;
            for (row, (gr, wr)) in g.chunks(row_bytes).zip(w.chunks(row_bytes)).enumerate() {
                if gr != wr && !unspecified(o.name, row) {
                    let col = (0..gr.len()).find(|&b| gr[b] != wr[b]).unwrap_or(0) / o.elem;
                    let at = col * o.elem..(col + 1) * o.elem;
                    bail!("{what}: {}[{row}][{col}] is {:02x?}, {reference} {:02x?}", o.name, &gr[at.clone()], &wr[at]);
                }
            }
        }
        Ok(())
    }

    /// `count` launches back to back: `enqueue(n)` stages launch `n`'s inputs and enqueues it, a
    /// copy of the outputs follows it, and only between batches of `slots` launches does `wait`
    /// wait for the stream; then `check(n, slot)` checks each launch of the batch. Returns the
    /// batches run.
    pub fn back_to_back(
        &self,
        gpu: &Gpu,
        count: usize,
        mut enqueue: impl FnMut(usize) -> anyhow::Result<()>,
        mut wait: impl FnMut() -> anyhow::Result<()>,
        mut check: impl FnMut(usize, usize) -> anyhow::Result<()>,
    ) -> anyhow::Result<usize> {
        let mut done = 0;
        while done < count {
            let batch = self.slots.min(count - done);
            for slot in 0..batch {
                enqueue(done + slot)?;
                self.capture(gpu, slot)?;
            }
            wait()?;
            for slot in 0..batch {
                check(done + slot, slot)?;
            }
            done += batch;
        }
        Ok(count.div_ceil(self.slots))
    }
}

/// The checks every two-path op's rank-check ends with, on inputs that cycle through
/// [`ALTERNATING_ROUNDS`] rounds (`which` 0, 1, 2) from launch to launch, so that a launch which
/// reads anything an earlier one left (a flag or slot of the wrong epoch, a row before it landed,
/// a source that a peer still reads when the next inputs are written) computes something else:
/// - one launch of each round through `path`, verified by `verify(which, what)` (the op's host
///   checks); their `outputs` are the references;
/// - `--back-to-back` launches, cycling, each preceded by `stage(which)` (enqueue that round's
///   inputs and the poison of what the launch writes, on the stream) and followed by a device copy
///   of `outputs`, with no host wait but between batches of what [`CAPTURE_BUDGET`] holds;
/// - with `--graph`, `replays` replays of a CUDA graph of the same for every round, through the
///   fused path (the one meant for graphs; verified launches of its own when `path` is not it).
///
/// Every launch's copy must equal its round's reference bit for bit, but for the rows of an
/// output that `unspecified(which, output name, row)` names (padding).
#[allow(clippy::too_many_arguments)]
pub fn alternating_checks(
    gpu: &Gpu,
    op: &impl TwoPathOp,
    path: Path,
    r: &RepeatArgs,
    replays: u32,
    outputs: &[Captured<'_>],
    mut stage: impl FnMut(usize) -> anyhow::Result<()>,
    mut verify: impl FnMut(usize, &str) -> anyhow::Result<()>,
    unspecified: impl Fn(usize, &str, usize) -> bool,
) -> anyhow::Result<()> {
    const N: usize = ALTERNATING_ROUNDS;
    let (back_to_back, replays) = (r.back_to_back as usize, if r.graph { replays as usize } else { 0 });
    if back_to_back == 0 && replays == 0 {
        return Ok(());
    }
    let history = History::new(gpu, outputs, back_to_back, N)?;
    let compare = |slot: usize, which: usize, want: &[u8], what: &str| {
        let reference = format!("the verified launch on the same inputs (round {which} of {N}) wrote");
        history.compare(slot, want, |name, row| unspecified(which, name, row), what, &reference)
    };
    // Verified launches of every round through `through`; their outputs are the references.
    let mut references = |through: Path| -> anyhow::Result<Vec<Vec<u8>>> {
        (0..N)
            .map(|which| {
                stage(which)?;
                op.launch_path(gpu, through)?;
                history.capture(gpu, 0)?;
                op.wait(gpu)?;
                verify(which, &format!("the alternating checks' reference launch {which} ({})", through.name()))?;
                history.bytes(0)
            })
            .collect()
    };
    let want = references(path)?;
    let fused = match (replays, path) {
        (0, _) | (_, Path::Fused) => None,
        _ => Some(references(Path::Fused)?),
    };
    // Launch 0 takes the inputs of round 0, not those of the reference launch just before it
    // (the last round's).
    let batches = history.back_to_back(
        gpu,
        back_to_back,
        |n| {
            stage(n % N)?;
            Ok(op.launch_path(gpu, path)?)
        },
        || Ok(op.wait(gpu)?),
        |n, slot| compare(slot, n % N, &want[n % N], &format!("launch {n} of {back_to_back} back to back")),
    )?;
    if replays > 0 {
        let fused = fused.as_ref().unwrap_or(&want);
        let graph = gpu.capture(|| {
            let mut enqueue = || -> anyhow::Result<()> {
                for which in 0..N {
                    stage(which)?;
                    op.launch_path(gpu, Path::Fused)?;
                    history.capture(gpu, which)?;
                }
                Ok(())
            };
            enqueue().map_err(|e| mkernel::GpuError::Module(e.to_string()))
        })?;
        for replay in 0..replays {
            graph.launch(gpu)?;
            op.wait(gpu)?;
            for (which, want) in fused.iter().enumerate() {
                let what = format!("CUDA graph replay {replay}, launch {which} of {N}");
                compare(which, which, want, &what)?;
            }
        }
    }
    println!(
        "alternating checks: {back_to_back} launches back to back ({batches} batch(es)), {replays} graph replays of {N} fused launches, each bit for bit against its round's verified launch"
    );
    Ok(())
}

pub fn rank_check(c: RankCheckCmd) -> anyhow::Result<()> {
    let world = World::from_env()?;
    match c {
        RankCheckCmd::Bootstrap { timeout_ms } => {
            let mut boot = Bootstrap::connect(&world, Duration::from_millis(timeout_ms))?;
            for round in 0..3u32 {
                let mine: Vec<u8> = (0..(world.rank as usize + 1) * 7).map(|i| pattern(world.rank, round, i)).collect();
                let all = boot.all_gather(&mine)?;
                for (r, b) in all.iter().enumerate() {
                    let want: Vec<u8> = (0..(r + 1) * 7).map(|i| pattern(r as u32, round, i)).collect();
                    ensure!(*b == want, "round {round}: blob from rank {r} is wrong");
                }
            }
            boot.barrier()?;
            println!("bootstrap ok: rank {} of {}", world.rank, world.world_size);
            Ok(())
        }
        RankCheckCmd::Allgather {
            shard_bytes,
            iters,
            intra_ctas,
            copy,
            in_place,
            chunk_bytes,
            timeout_ms,
            graph,
            absent_rank,
        } => {
            let timeout = Duration::from_millis(timeout_ms);
            let opts =
                AllGatherOptions { intra_ctas, copy: copy.into(), in_place, chunk_bytes: chunk_bytes as u64, timeout };
            match absent_rank {
                Some(absent) => allgather_absent(&world, shard_bytes, opts, absent),
                None => {
                    let gpu = Gpu::new(world.device)?;
                    let comm = allgather_comm(&world, &gpu, shard_bytes, &opts)?;
                    allgather_check((&world, &gpu, &comm), shard_bytes, (iters, graph), opts.clone())?;
                    allgather_rebuilt((&world, &gpu, &comm), shard_bytes, opts)
                }
            }
        }
        RankCheckCmd::AgGemm(a) => crate::cmd_ag_gemm::check(&world, a),
        RankCheckCmd::GemmRs(a) => {
            crate::cmd_gemm_rs::check(&world, mkernel::ops::gemm_rs::Collective::ReduceScatter, a)
        }
        RankCheckCmd::GemmAr(a) => crate::cmd_gemm_rs::check(&world, mkernel::ops::gemm_rs::Collective::AllReduce, a),
        RankCheckCmd::Moe(a) => crate::cmd_moe::check(&world, a),
        RankCheckCmd::RingAttention(a) => crate::cmd_ring::check(a),
        RankCheckCmd::Soak(a) => crate::cmd_soak::soak(a),
    }
}

/// The communicator the all-gather checks run on: a heap for `shard`-byte shards, every bootstrap
/// step bounded by the op's timeout.
fn allgather_comm(world: &World, gpu: &Gpu, shard: usize, opts: &AllGatherOptions) -> anyhow::Result<Communicator> {
    let copts = CommOptions {
        heap_bytes: 2 * shard * world.world_size as usize + (1 << 20),
        timeout: opts.timeout,
        ..CommOptions::from_env()?
    };
    Ok(Communicator::new(gpu, world, copts)?)
}

/// One rank never launches: every other rank's launch must end in a device-wait report that names
/// the absent rank (with the copy engines the report comes before the context stops), and nothing
/// may land in the absent rank's output, which it checks after outliving the others' waits.
fn allgather_absent(world: &World, shard: usize, opts: AllGatherOptions, absent: u32) -> anyhow::Result<()> {
    ensure!(absent < world.world_size, "--absent-rank {absent}: the world has {} ranks", world.world_size);
    let gpu = Gpu::new(world.device)?;
    let comm = allgather_comm(world, &gpu, shard, &opts)?;
    let ag = AllGather::new(&comm, &gpu, shard, opts.clone())?;
    if world.rank == absent {
        // Poisoned before any peer could give up waiting for us: whatever lands in it later was
        // written into a rank that never became ready.
        ag.output().fill_bytes(0xa5)?;
        std::thread::sleep(3 * opts.timeout + Duration::from_secs(2));
        if let Some(i) = ag.output().to_vec()?.iter().position(|&b| b != 0xa5) {
            bail!("rank {absent}: byte {i} of its output was written although it never launched");
        }
        println!("allgather absent ok: rank {absent} stayed away and its output is untouched");
        return Ok(());
    }
    ag.input().fill_bytes(world.rank as u8)?;
    ag.launch(&gpu)?;
    let err = match ag.wait(&gpu) {
        Ok(()) => bail!("rank {}: the launch completed although rank {absent} never launched", world.rank),
        Err(e) => format!("{e:#}"),
    };
    // A local peer's absence shows in the wait for its `ready` (the tile is the awaited rank); with
    // several nodes a rank may instead report the wait for data that the absent rank's node never
    // forwarded.
    ensure!(
        err.contains("device wait timed out") && err.contains("waited"),
        "rank {}: unexpected error: {err}",
        world.rank
    );
    if world.nodes == 1 {
        ensure!(
            err.contains(&format!("(tile {absent})")),
            "rank {}: the report does not name rank {absent}: {err}",
            world.rank
        );
    }
    println!("allgather absent ok: rank {} (copy {:?}) reported: {err}", world.rank, ag.copy());
    Ok(())
}

fn allgather_check(
    (world, gpu, comm): (&World, &Gpu, &Communicator),
    shard: usize,
    (iters, graph): (u32, bool),
    opts: AllGatherOptions,
) -> anyhow::Result<()> {
    let ag = AllGather::new(comm, gpu, shard, opts)?;
    let capture = || gpu.capture(|| ag.launch(gpu).map_err(|e| mkernel::GpuError::Module(e.to_string())));
    let graph = if graph { Some(capture()?) } else { None };
    let launch = || match &graph {
        Some(g) => Ok(g.launch(gpu)?),
        None => ag.launch(gpu),
    };
    let w = world.world_size as usize;
    // New data every launch and no barrier between launches: a rank writes into a peer's output
    // only once that peer entered the same launch (its `ready` flag), so the peer's check of the
    // previous launch is over by then; and a launch ends only after the proxy's WRITEs for other
    // nodes have read this rank's shard (the FIFO's released position), so the next input may
    // be written at once.
    // Two poisons in turn: a byte left unwritten cannot pass where a launch's data happen to
    // equal one of them.
    let poison = |n: usize| if n.is_multiple_of(2) { 0xa5 } else { 0x5a };
    for it in 0..iters {
        let mine: Vec<u8> = (0..shard).map(|i| pattern(world.rank, it, i)).collect();
        ag.output().fill_bytes(poison(it as usize))?;
        ag.input().copy_from(&mine)?; // after the poison: may alias it
        launch()?;
        ag.wait(gpu)?;
        verify_gathered(world, &ag, it, &format!("launch {it}"))?;
    }
    // Many launches back to back, no host synchronisation and no reset in between, the inputs
    // cycling through three rounds (`ALTERNATING_ROUNDS`), each written on the stream right after
    // the launch before ends: a launch (or the proxy) that read a shard late, or a peer's rows
    // before they landed, leaves another round's bytes, which the copy of every launch's output
    // shows.
    const N: usize = ALTERNATING_ROUNDS;
    let round = |k: usize| iters + k as u32;
    let inputs = (0..N)
        .map(|k| gpu.upload(&(0..shard).map(|i| pattern(world.rank, round(k), i)).collect::<Vec<u8>>()))
        .collect::<Result<Vec<_>, _>>()?;
    let wants: Vec<Vec<u8>> = (0..N)
        .map(|k| (0..w).flat_map(|r| (0..shard).map(move |i| pattern(r as u32, round(k), i))).collect())
        .collect();
    const BACK_TO_BACK: usize = 50;
    let output = [Captured::of("output", &ag.output(), shard)];
    let history = History::new(gpu, &output, BACK_TO_BACK, 1)?;
    history.back_to_back(
        gpu,
        BACK_TO_BACK,
        |n| {
            // SAFETY: the output, the input (which may alias the output's own slice: poisoned
            // first) and the round's upload outlive the wait that ends each batch.
            unsafe {
                enqueue_fill(gpu, &ag.output(), poison(n))?;
                enqueue_copy(gpu, &ag.input(), &inputs[n % N].as_slice())?;
            }
            Ok(launch()?)
        },
        || Ok(ag.wait(gpu)?),
        |n, slot| {
            let what = format!("rank {}: back-to-back launch {n} (round {} of {N})", world.rank, n % N);
            // Row r of the output is rank r's shard.
            history.compare(slot, &wants[n % N], |_, _| false, &what, "want")
        },
    )?;
    comm.barrier()?;
    println!(
        "allgather ok: rank {} of {} ({} nodes, transport {}, copy {:?}{}), shard {shard} B, {iters} checked launches + {BACK_TO_BACK} back to back on alternating inputs; proxy {:?}",
        world.rank,
        world.world_size,
        world.nodes,
        comm.transport(),
        ag.copy(),
        if graph.is_some() { ", graph" } else { "" },
        comm.proxy_stats()
    );
    Ok(())
}

/// Every rank's shard in `ag`'s output is the one rank `r` wrote for launch `it`
/// (`pattern(r, it, i)`); `what` names the launch in the error.
fn verify_gathered(world: &World, ag: &AllGather, it: u32, what: &str) -> anyhow::Result<()> {
    let shard = ag.shard_bytes();
    let out = ag.output().to_vec()?;
    for (r, got) in out.chunks(shard).enumerate() {
        if let Some(i) = (0..shard).find(|&i| got[i] != pattern(r as u32, it, i)) {
            bail!(
                "rank {}: {what}: byte {i} of rank {r}'s shard is wrong ({} vs {})",
                world.rank,
                got[i],
                pattern(r as u32, it, i)
            );
        }
    }
    Ok(())
}

/// After [`allgather_check`]'s op on the same communicator: ops dropped while their launch may
/// still run, each followed by a new one in the same heap (whose room holds one op, so the new
/// one takes the dropped one's memory: the communicator first drains this GPU's streams and
/// meets the other ranks, as a peer's last flags of the old launch may still be on their way
/// here). The last op's launch is waited for and checked.
fn allgather_rebuilt(
    (world, gpu, comm): (&World, &Gpu, &Communicator),
    shard: usize,
    opts: AllGatherOptions,
) -> anyhow::Result<()> {
    const REBUILDS: u32 = 3;
    let mut before = 0;
    for k in 0..REBUILDS {
        let ag = AllGather::new(comm, gpu, shard, opts.clone())?;
        if k == 0 {
            before = comm.heap_reuses();
        }
        let it = 1000 + k;
        ag.output().fill_bytes(0xa5)?;
        ag.input().copy_from(&(0..shard).map(|i| pattern(world.rank, it, i)).collect::<Vec<u8>>())?;
        ag.launch(gpu)?;
        if k + 1 < REBUILDS {
            continue; // dropped unwaited
        }
        ag.wait(gpu)?;
        verify_gathered(world, &ag, it, &format!("rebuilt op {k}"))?;
    }
    // Past half a MiB a shard, two ops with inputs outgrow the heap (2 x world shards + 1 MiB):
    // every op after the first must have taken memory of an op dropped with its launch in flight.
    let reuses = comm.heap_reuses() - before;
    ensure!(
        shard < 1 << 19 || opts.in_place || reuses >= u64::from(REBUILDS - 1),
        "rank {}: {reuses} of the {} ops built after an unwaited drop reused its memory",
        world.rank,
        REBUILDS - 1
    );
    comm.barrier()?;
    println!("allgather rebuilt ok: rank {}, {REBUILDS} ops, {reuses} reuses of dropped ops' memory", world.rank);
    Ok(())
}

/// One rank of a multi-rank bench or tune (`None`: this process started the ranks instead): its
/// world, GPU and a communicator with a heap of `heap(world)` bytes, once every problem's operands
/// (`elements(world)`, bf16 elements each, `None` on overflow) fit the GPU, else a typed error
/// naming `flag` before anything is allocated.
pub fn bench_rank(
    ranks: &RanksArgs,
    flag: &'static str,
    elements: impl Fn(&World) -> Vec<Option<usize>>,
    heap: impl Fn(&World) -> usize,
) -> anyhow::Result<Option<(World, Gpu, Communicator)>> {
    let Some(world) = as_rank(ranks)? else { return Ok(None) };
    let gpu = Gpu::new(world.device)?;
    for e in elements(&world) {
        gpu.check_fits(flag, e, 2)?;
    }
    let comm = Communicator::new(&gpu, &world, CommOptions { heap_bytes: heap(&world), ..CommOptions::from_env()? })?;
    Ok(Some((world, gpu, comm)))
}

/// A tuning sweep over two knobs of a two-path op: each point's fused and unfused times (the
/// slowest rank's medians, interleaved), taken once per round of the sweep; a point counts with
/// the median of its rounds (single timings of one setting spread by up to 20% on a shared
/// machine: a round whose window met a slow spell decided the table), the fastest fused point
/// wins, and the faster path there.
pub struct Sweep<K = (u32, u32)> {
    /// Per point, in the order first timed.
    points: Vec<SweepPoint<K>>,
}

/// One point of a [`Sweep`]: its knobs and its rounds' times.
struct SweepPoint<K> {
    knobs: K,
    fused: Vec<f64>,
    unfused: Vec<f64>,
}

impl Sweep {
    /// The points of a sweep over knobs `a` x `b`, `rounds` times, rounds outermost (so each
    /// point's rounds are spread over the whole sweep): `(round, (a, b))`, rounds from 1.
    pub fn grid<'k>(rounds: u32, a: &'k [u32], b: &'k [u32]) -> impl Iterator<Item = (u32, (u32, u32))> + 'k {
        (1..=rounds).flat_map(move |r| a.iter().flat_map(move |&x| b.iter().map(move |&y| (r, (x, y)))))
    }
}

impl<K: Copy + PartialEq> Sweep<K> {
    /// An empty sweep.
    pub fn new() -> Self {
        Self { points: Vec::new() }
    }

    /// Time `op` at knobs `(a, b)` (one more sample if timed before); returns this round's fused
    /// and unfused times.
    pub fn point(
        &mut self,
        gpu: &Gpu,
        comm: &Communicator,
        timing: Timing,
        op: &impl TwoPathOp,
        knobs: K,
    ) -> anyhow::Result<[f64; 2]> {
        let mut fused = || op.launch_path(gpu, Path::Fused);
        let mut unfused = || op.launch_path(gpu, Path::Unfused);
        let ms = harness::time_each(gpu, &mut &*comm, timing, &mut [&mut fused, &mut unfused])?;
        op.wait(gpu)?;
        self.record(knobs, ms[0], ms[1]);
        Ok([ms[0], ms[1]])
    }

    /// Add one round's times of the point `knobs`.
    pub fn record(&mut self, knobs: K, fused_ms: f64, unfused_ms: f64) {
        match self.points.iter_mut().find(|p| p.knobs == knobs) {
            Some(p) => {
                p.fused.push(fused_ms);
                p.unfused.push(unfused_ms);
            }
            None => self.points.push(SweepPoint { knobs, fused: vec![fused_ms], unfused: vec![unfused_ms] }),
        }
    }

    /// The median fused and unfused times of the point `knobs` over its rounds.
    pub fn medians(&self, knobs: K) -> Option<(f64, f64)> {
        self.points.iter().find(|p| p.knobs == knobs).map(|p| (median(&p.fused), median(&p.unfused)))
    }

    /// The fastest fused point's knobs and median time, the best unfused median (over the
    /// points) and the faster path's name.
    pub fn result(&self) -> anyhow::Result<(K, f64, f64, &'static str)> {
        let (knobs, fused) = self
            .points
            .iter()
            .map(|p| (p.knobs, median(&p.fused)))
            .min_by(|a, b| a.1.total_cmp(&b.1))
            .context("nothing to sweep")?;
        let unfused = self.points.iter().map(|p| median(&p.unfused)).fold(f64::INFINITY, f64::min);
        let path = if fused <= unfused { "fused" } else { "unfused" };
        Ok((knobs, fused, unfused, path))
    }
}

/// The median of some samples (the upper one of an even count).
fn median(samples: &[f64]) -> f64 {
    let mut v = samples.to_vec();
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Rank 0 of a tuning run: print the table's JSON lines and write them to `out`, to be appended
/// to `host/ops/tuned/<table>.jsonl`.
pub fn write_tune_table(
    world: &World,
    lines: &[serde_json::Value],
    out: &std::path::Path,
    table: &str,
) -> anyhow::Result<()> {
    if world.rank != 0 {
        return Ok(());
    }
    let text: String = lines.iter().map(|l| l.to_string() + "\n").collect();
    print!("{text}");
    std::fs::write(out, text).with_context(|| format!("writing {}", out.display()))?;
    eprintln!("tune: table written to {} (append it to host/ops/tuned/{table}.jsonl)", out.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sweep_picks_by_the_median_of_each_points_rounds() {
        let mut s = Sweep::new();
        // Point (4, 128) has one slow round; (8, 64) one lucky one. Medians: 1.00 and 1.10.
        for (f, u) in [(1.0, 2.0), (1.5, 2.1), (0.99, 1.9)] {
            s.record((4, 128), f, u);
        }
        for (f, u) in [(1.1, 2.0), (0.9, 2.2), (1.2, 2.3)] {
            s.record((8, 64), f, u);
        }
        assert_eq!(s.medians((4, 128)), Some((1.0, 2.0)));
        assert_eq!(s.medians((8, 64)), Some((1.1, 2.2)));
        assert_eq!(s.medians((1, 1)), None);
        let (knobs, fused, unfused, path) = s.result().unwrap();
        assert_eq!((knobs, fused, unfused, path), ((4, 128), 1.0, 2.0, "fused"));
        // The unfused path wins where its best median beats the best fused one.
        let grid: Vec<_> = Sweep::grid(2, &[4, 8], &[128]).collect();
        assert_eq!(grid, [(1, (4, 128)), (1, (8, 128)), (2, (4, 128)), (2, (8, 128))]);
        let mut t = Sweep::new();
        t.record((1, 1), 3.0, 2.0);
        assert_eq!(t.result().unwrap().3, "unfused");
        assert!(Sweep::<(u32, u32)>::new().result().is_err());
    }
}
