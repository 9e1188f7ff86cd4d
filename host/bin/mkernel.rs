//! `mkernel`: what GPUs are here and whether mkernel works on them (`info`), one process per rank
//! (`launch`), benchmarks beside their baselines (`bench`), role-split sweeps (`tune`), charts of
//! results (`plot`) and the per-rank checks the multi-process tests run (`rank-check`).
//!
//! Exit codes: 0 success; 1 the command failed; 2 bad usage (every value is checked by the parser
//! before anything touches a GPU); 3 no usable CUDA device for a command that needs one; 128 + N
//! `launch` stopped by signal N (every rank killed).
use clap::{Args, Parser, Subcommand};
use mkernel::gemm::{BLayout, GemmShape};
use std::path::PathBuf;
use std::process::ExitCode;

mod args;
mod cmd_ag_gemm;
mod cmd_bench;
mod cmd_gemm_rs;
mod cmd_info;
mod cmd_moe;
mod cmd_rank;
mod cmd_ring;
mod cmd_soak;
mod plot;
mod trace;

/// Exit code of a command that needs a CUDA device where none is usable.
const EXIT_NO_DEVICE: u8 = 3;

#[derive(Parser, Debug)]
#[command(
    name = "mkernel",
    version,
    about = "Persistent fused multi-GPU kernels for Hopper: check, launch, benchmark, plot"
)]
#[command(
    after_help = "Exit codes: 0 success, 1 failure, 2 bad usage, 3 no usable CUDA device, 128+N launch stopped by signal N."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// GPUs, their topology (peer access, NVLink), RDMA devices, the transport each layout would
    /// use, and a GEMM self-check on each Hopper GPU.
    Info,
    /// Start one process per rank with torchrun-style variables; stop all when one fails.
    Launch(LaunchArgs),
    /// Benchmarks beside their baselines (same GPU, same process, interleaved; JSON lines).
    #[command(subcommand)]
    Bench(BenchCmd),
    /// Sweep an op's role split and chunk size on this machine and write the table its defaults
    /// come from.
    #[command(subcommand)]
    Tune(TuneCmd),
    /// Charts of benchmark JSON lines (ours and torch_baselines.py's), SVG and PNG.
    Plot(PlotArgs),
    /// The per-rank checks the multi-process tests run (under `mkernel launch`).
    #[command(subcommand)]
    RankCheck(RankCheckCmd),
}

/// `mkernel launch`.
#[derive(Args, Debug)]
pub struct LaunchArgs {
    /// Processes (ranks) to start.
    #[arg(short = 'n', long = "nprocs", allow_negative_numbers = true, value_parser = args::count::<1, 1024>)]
    pub nprocs: u32,
    /// Emulated nodes the ranks form (must divide --nprocs): the inter-node path (FIFO, proxy,
    /// emulated NIC) then runs between groups of GPUs of this host.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub nodes: u32,
    /// GPU of each rank (default: rank r uses GPU r).
    #[arg(long, value_delimiter = ',', value_parser = args::ordinal)]
    pub gpus: Option<Vec<u32>>,
    /// Kill every rank after this many seconds.
    #[arg(long = "timeout-s", default_value_t = 900, value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout_s: u64,
    /// The program and its arguments (put `--` before them when they start with `-`).
    #[arg(required = true, trailing_var_arg = true, value_name = "PROGRAM")]
    pub command: Vec<std::ffi::OsString>,
}

/// How timed loops run.
#[derive(Args, Debug, Clone, Copy)]
pub struct TimingArgs {
    /// Timed iterations (median reported).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub reps: u32,
    /// Untimed launches first.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(0..=100_000))]
    pub warmup: u32,
}

impl TimingArgs {
    fn timing(&self) -> mkernel::bench::Timing {
        mkernel::bench::Timing { warmup: self.warmup as usize, reps: self.reps as usize, device_barrier: false }
    }
}

/// How the timed loops of a multi-rank benchmark run.
#[derive(Args, Debug, Clone, Copy)]
pub struct RankTimingArgs {
    #[command(flatten)]
    timing: TimingArgs,
    /// After each host barrier, also line the GPUs up with a 16-byte all-gather queued before
    /// the timed work, so that the host barrier's release spread (tens of us) is not timed.
    #[arg(long)]
    device_barrier: bool,
}

impl RankTimingArgs {
    fn timing(&self) -> mkernel::bench::Timing {
        mkernel::bench::Timing { device_barrier: self.device_barrier, ..self.timing.timing() }
    }
}

/// Timing of a tuning sweep: each point's launches, and rounds of the whole sweep.
#[derive(Args, Debug)]
pub struct TuneTimingArgs {
    #[command(flatten)]
    timing: TimingArgs,
    /// Rounds of the whole sweep, interleaved; each point counts with the median of its rounds
    /// (single timings of one setting spread by up to 20% on a shared machine).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    rounds: u32,
}

impl TuneTimingArgs {
    fn tune_timing(&self) -> (mkernel::bench::Timing, u32) {
        (self.timing.timing(), self.rounds)
    }
}

/// Where several ranks run: as ranks of an outer `mkernel launch`, or started by the command.
#[derive(Args, Debug, Clone)]
pub struct RanksArgs {
    /// Ranks to start when not already running under `mkernel launch` (default: every GPU).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub world: Option<u32>,
    /// Emulated nodes those ranks form (must divide the world).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub nodes: u32,
}

#[derive(Subcommand, Debug)]
enum BenchCmd {
    /// mkernel's GEMM beside cuBLAS on one GPU.
    Gemm {
        /// Shapes MxNxK, comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = args::shape,
              default_value = "8192x8192x8192,16384x8192x8192,16384x4096x8192,16384x16384x2048")]
        shapes: Vec<GemmShape>,
        /// B layouts: nk ([N, K]) and/or kn ([K, N]).
        #[arg(long, value_delimiter = ',', value_parser = args::layout, default_value = "nk,kn")]
        layouts: Vec<BLayout>,
        /// Units each output tile's k-blocks are cut into (default: per shape, see
        /// `gemm::default_split_k`; 1 turns split-K off).
        #[arg(long = "split-k", value_parser = clap::value_parser!(u32).range(1..))]
        split_k: Option<u32>,
        /// Shared-memory ring of unsplit launches: `deep` (as many stages as fit, stores from
        /// registers) or `staged` (3 stages, TMA stores) (default: per shape, see
        /// `gemm::default_deep_ring`; split-K, stream-K and tiles narrower than 256 always run
        /// deep).
        #[arg(long, value_parser = ["deep", "staged"])]
        ring: Option<String>,
        /// Output tile width in columns: 64, 128, 192, 224 or 256 (default: per shape, see
        /// `gemm::default_tile_n`).
        #[arg(long = "tile-n", value_parser = args::tile_width)]
        tile_n: Option<u32>,
        /// Stream-K on or off (default off; only with 256-column tiles and no split).
        #[arg(long = "stream-k", value_parser = ["on", "off"])]
        stream_k: Option<String>,
        /// Also time the gathered GEMM (`gemm::GatherGemm`): A's M rows picked at random, with
        /// repeats, from a source of M rows, beside the GEMMs of the same rows laid out in order.
        #[arg(long)]
        gather: bool,
        #[command(flatten)]
        timing: TimingArgs,
        /// Also write JSON lines here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The flash-attention forward on one GPU (cuDNN and FlashAttention-2 beside it come from
    /// torch_baselines.py single, run in the same call).
    Attention {
        /// Configs BxHxSxD (batch, heads, sequence, head dim), comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = args::attention,
              default_value = "4x16x8192x128,1x16x32768x128,4x32x8192x64")]
        configs: Vec<mkernel::attention::AttentionShape>,
        /// Layouts: bhsd ([B, H, S, D], as torch) and/or bshd.
        #[arg(long, value_delimiter = ',', value_parser = args::attn_layout, default_value = "bhsd")]
        layouts: Vec<mkernel::attention::AttnLayout>,
        /// Masks to time: causal and/or full.
        #[arg(long, value_delimiter = ',', value_parser = args::mask, default_value = "full,causal")]
        masks: Vec<bool>,
        /// Persistent CTAs (default: one per SM; fewer shows what SMs given to other roles cost).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        ctas: Option<u32>,
        #[command(flatten)]
        timing: TimingArgs,
        /// Also write JSON lines here.
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The GPU-driven all-gather beside the copy engine (run on several ranks).
    Allgather {
        /// Output sizes (bytes, or with K/M/G), comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = args::size, default_value = "1M,16M,256M")]
        sizes: Vec<usize>,
        /// CTAs copying over NVLink (default: 64 for `lsu`, 16 for the bulk copies).
        #[arg(long = "intra-ctas", value_parser = clap::value_parser!(u32).range(1..=1024))]
        intra_ctas: Option<u32>,
        /// How those CTAs copy.
        #[arg(long, value_enum, default_value_t = CopyArg::Auto)]
        copy: CopyArg,
        /// Gather in place (the shard already sits in the output).
        #[arg(long = "in-place")]
        in_place: bool,
        #[command(flatten)]
        ranks: RanksArgs,
        #[command(flatten)]
        timing: RankTimingArgs,
        /// Also write JSON lines here (rank 0).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// AllGather + GEMM: fused, unfused, GEMM alone and all-gather alone (run on several ranks).
    AgGemm {
        /// Shapes MxNxK (M in all: each rank holds M / world rows), comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = args::shape,
              default_value = "16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096")]
        shapes: Vec<GemmShape>,
        /// B layouts: kn ([K, N], as torch_baselines.py) and/or nk.
        #[arg(long, value_delimiter = ',', value_parser = args::layout, default_value = "kn")]
        layouts: Vec<BLayout>,
        #[command(flatten)]
        knobs: cmd_ag_gemm::Knobs,
        /// Shards written straight into the gathered buffer (no input buffer, no local copy).
        #[arg(long = "in-place")]
        in_place: bool,
        #[command(flatten)]
        ranks: RanksArgs,
        #[command(flatten)]
        timing: RankTimingArgs,
        /// Also write JSON lines here (rank 0).
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        trace: trace::TraceArgs,
    },
    /// GEMM + ReduceScatter: fused, unfused and the GEMM alone (run on several ranks).
    GemmRs(RsBenchArgs),
    /// GEMM + AllReduce: fused, unfused and the GEMM alone (run on several ranks).
    GemmAr(RsBenchArgs),
    /// MoE dispatch + grouped GEMM: fused, unfused, the grouped GEMM alone and the dispatch alone
    /// (run on several ranks; torch_baselines.py moe's configs by default).
    Moe {
        /// Configs TxHxIxExk (tokens per rank, hidden, inter, experts, top-k), comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = cmd_moe::config,
              default_value = "4096x7168x2048x256x8,8192x4096x14336x8x2")]
        configs: Vec<cmd_moe::MoeConfig>,
        /// Experts' weights layouts: kn ([E/W, H, I], as torch_baselines.py) and/or nk.
        #[arg(long, value_delimiter = ',', value_parser = args::layout, default_value = "kn")]
        layouts: Vec<BLayout>,
        /// The tokens' routing: uniform (as torch_baselines.py) or balanced (every expert the same
        /// rows, no tile-row padding), or the rank-check's others.
        #[arg(long, value_enum, default_value_t = cmd_moe::Routing::Uniform)]
        routing: cmd_moe::Routing,
        #[command(flatten)]
        knobs: cmd_moe::Knobs,
        #[command(flatten)]
        ranks: RanksArgs,
        #[command(flatten)]
        timing: RankTimingArgs,
        /// Also write JSON lines here (rank 0).
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        trace: trace::TraceArgs,
    },
    /// Ring attention (run on several ranks) beside the single-GPU kernel on one rank's block;
    /// torch_baselines.py ring is the baseline.
    RingAttention {
        /// Per-rank shards BxHxSxD (S: rows per rank), comma-separated (torch_baselines.py ring's).
        #[arg(long, value_delimiter = ',', value_parser = args::attention,
              default_value = "1x32x16384x128,4x16x8192x128")]
        configs: Vec<mkernel::attention::AttentionShape>,
        /// Masks to time: causal (zigzag shards) and/or full.
        #[arg(long, value_delimiter = ',', value_parser = args::mask, default_value = "full,causal")]
        masks: Vec<bool>,
        /// CTAs that move K and V to the next rank (default: a rule of thumb, 8 or more, when it is
        /// on this node; else 1).
        #[arg(long = "comm-ctas", value_parser = clap::value_parser!(u32).range(1..=64))]
        comm_ctas: Option<u32>,
        /// Receive slots (default: one per step after the first, W - 1).
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..))]
        slots: Option<u32>,
        /// Tiles walked one step per unit (default: modelled; 0: every tile one unit over all
        /// steps).
        #[arg(long = "split-tiles")]
        split_tiles: Option<u32>,
        #[command(flatten)]
        ranks: RanksArgs,
        #[command(flatten)]
        timing: TimingArgs,
        /// Also write JSON lines here (rank 0).
        #[arg(long)]
        json: Option<PathBuf>,
    },
    /// The GPU -> CPU command FIFO: commands per second and round-trip latency on one GPU.
    Fifo {
        /// Pushing CTAs.
        #[arg(long, default_value_t = 132, value_parser = clap::value_parser!(u32).range(1..=65535))]
        blocks: u32,
        /// Pushing threads per CTA.
        #[arg(long, default_value_t = 128, value_parser = clap::value_parser!(u32).range(1..=1024))]
        threads: u32,
        /// Commands each thread pushes.
        #[arg(long = "per-thread", default_value_t = 32, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        per_thread: u32,
        /// GPU -> proxy -> GPU round trips to time.
        #[arg(long, default_value_t = 2000, value_parser = clap::value_parser!(u32).range(1..=10_000_000))]
        rounds: u32,
        /// Also sweep ring size, producers and checking.
        #[arg(long)]
        matrix: bool,
    },
    /// How soon a side stream follows a word raised by a kernel that holds every SM: a stream
    /// memory wait against a host thread polling (one GPU).
    StreamWait {
        /// Raises per run.
        #[arg(long, default_value_t = 40, value_parser = clap::value_parser!(u32).range(1..=100_000))]
        raises: u32,
        /// Microseconds between raises.
        #[arg(long = "period-us", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=1_000_000))]
        period_us: u32,
        /// Runs.
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
        runs: u32,
        /// Also copies of this many MiB into GPU 1 (two GPUs): queued at once, and behind each
        /// raise's stream wait on one and on three streams.
        #[arg(long = "peer-mib", value_parser = clap::value_parser!(u32).range(1..=4096))]
        peer_mib: Option<u32>,
    },
}

/// `bench gemm-rs` / `bench gemm-ar`.
#[derive(Args, Debug)]
pub struct RsBenchArgs {
    /// Shapes MxNxK (all of K: each rank holds A[M, K/W]), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = args::shape,
          default_value = "16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096")]
    shapes: Vec<GemmShape>,
    /// B layouts: kn ([K/W, N], as torch_baselines.py) and/or nk.
    #[arg(long, value_delimiter = ',', value_parser = args::layout, default_value = "kn")]
    layouts: Vec<BLayout>,
    #[command(flatten)]
    knobs: cmd_gemm_rs::Knobs,
    #[command(flatten)]
    ranks: RanksArgs,
    #[command(flatten)]
    timing: RankTimingArgs,
    /// Also write JSON lines here (rank 0).
    #[arg(long)]
    json: Option<PathBuf>,
    #[command(flatten)]
    trace: trace::TraceArgs,
}

impl RsBenchArgs {
    fn run(self, collective: mkernel::ops::gemm_rs::Collective) -> anyhow::Result<()> {
        let json = self.json.as_deref();
        let opts = self.knobs.options(Default::default());
        let problems = (&self.shapes[..], &self.layouts[..]);
        cmd_gemm_rs::bench(collective, problems, opts, &self.ranks, self.timing.timing(), json, &self.trace)
    }
}

/// `tune gemm-rs` / `tune gemm-ar`.
#[derive(Args, Debug)]
pub struct RsTuneArgs {
    /// Shapes MxNxK (all of K), comma-separated.
    #[arg(long, value_delimiter = ',', value_parser = args::shape,
          default_value = "512x4096x4096,1024x4096x4096,2048x4096x4096,4096x4096x4096,8192x8192x8192,16384x4096x8192,16384x8192x8192,32768x4096x8192")]
    shapes: Vec<GemmShape>,
    /// One node: leads to try besides the default (every send first; two waves for a
    /// reduce-scatter over more than two ranks): rounds of sends before the first own tile, or
    /// `all`.
    #[arg(long, value_delimiter = ',', value_parser = args::lead, default_value = "0,1,33,66,132,all")]
    leads: Vec<u32>,
    /// Several nodes: inter-reduce CTA counts to try besides the default.
    #[arg(long = "inter-reduce", value_delimiter = ',', default_value = "16,32,64,96",
          value_parser = clap::value_parser!(u32).range(1..=128))]
    inter_reduce: Vec<u32>,
    /// Several nodes: tiles per FIFO WRITE to try.
    #[arg(long, value_delimiter = ',', default_value = "8", value_parser = clap::value_parser!(u32).range(1..))]
    groups: Vec<u32>,
    #[command(flatten)]
    ranks: RanksArgs,
    #[command(flatten)]
    timing: TuneTimingArgs,
    /// Where the table goes (JSON lines; append it to host/ops/tuned/gemm_rs.jsonl).
    #[arg(long, default_value = "gemm_rs.jsonl")]
    out: PathBuf,
}

impl RsTuneArgs {
    fn run(self, collective: mkernel::ops::gemm_rs::Collective) -> anyhow::Result<()> {
        let knobs = cmd_gemm_rs::TuneKnobs { leads: self.leads, inter_reduce: self.inter_reduce, groups: self.groups };
        cmd_gemm_rs::tune(collective, &self.shapes, &knobs, &self.ranks, self.timing.tune_timing(), &self.out)
    }
}

#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum CopyArg {
    /// TMA bulk copies through shared memory, one issuing thread per CTA.
    Bulk,
    /// 16-byte vector loads and stores from every thread, each vector loaded once and stored to
    /// every local rank.
    Lsu,
    /// Bulk copies, each piece loaded once and stored to every local rank at once.
    Fan,
    /// Bulk copies that read: each rank pulls every local peer's shard into its own output.
    Pull,
    /// The copy engines, enqueued peer after peer between two synchronising launches (one node;
    /// with several, the other nodes' shards still go through the FIFO and proxy).
    Ce,
    /// By shard size (`NvlinkCopy::plan`): on one node the copy engines from 16 MiB shards (128
    /// MiB at two ranks per node); else `lsu` from 16 MiB (8 MiB at two ranks); below, `fan`
    /// above two ranks per node, `bulk` at two.
    Auto,
}

#[derive(Subcommand, Debug)]
enum TuneCmd {
    /// AllGather + GEMM: push CTAs x rows per flag, fused vs unfused, per shape (several ranks).
    AgGemm {
        /// Shapes MxNxK (M in all), comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = args::shape,
              default_value = "16384x8192x8192,16384x4096x8192,32768x4096x8192,8192x8192x8192,2048x4096x4096")]
        shapes: Vec<GemmShape>,
        /// Push CTA counts to try.
        #[arg(long = "push-ctas", value_delimiter = ',', default_value = "2,4,6,8,12,16",
              value_parser = clap::value_parser!(u32).range(1..=64))]
        push_ctas: Vec<u32>,
        /// Rows per arrival flag to try.
        #[arg(long = "chunk-rows", value_delimiter = ',', default_value = "128,256,512",
              value_parser = clap::value_parser!(u32).range(1..))]
        chunk_rows: Vec<u32>,
        #[command(flatten)]
        ranks: RanksArgs,
        #[command(flatten)]
        timing: TuneTimingArgs,
        /// Where the table goes (JSON lines; append it to host/ops/tuned/ag_gemm.jsonl).
        #[arg(long, default_value = "ag_gemm.jsonl")]
        out: PathBuf,
    },
    /// GEMM + ReduceScatter: one node, the tile walk's lead; several nodes, inter-reduce CTAs x
    /// tiles per FIFO WRITE; fused vs unfused, per shape (several ranks).
    GemmRs(RsTuneArgs),
    /// GEMM + AllReduce: as gemm-rs, and on one node one shot as well.
    GemmAr(RsTuneArgs),
    /// MoE dispatch + grouped GEMM: pull CTAs x records per run x the pull CTAs joining the
    /// tiles or not, fused vs unfused, per config (several ranks).
    Moe {
        /// Configs TxHxIxExk, comma-separated.
        #[arg(long, value_delimiter = ',', value_parser = cmd_moe::config,
              default_value = "4096x7168x2048x256x8,8192x4096x14336x8x2")]
        configs: Vec<cmd_moe::MoeConfig>,
        /// Pull CTA counts to try.
        #[arg(long = "pull-ctas", value_delimiter = ',', default_value = "8,16,24,32,40",
              value_parser = clap::value_parser!(u32).range(1..=64))]
        pull_ctas: Vec<u32>,
        /// Records per pull item to try. Short runs by default: on 4 x H200 each pull-CTA count
        /// had one best run length, at about 120-140 records in flight in all (docs/PERF.md,
        /// "MoE at 1 x 4: more pull CTAs with shorter runs").
        #[arg(long = "run-records", value_delimiter = ',', default_value = "4,5,6,8,12,16,32",
              value_parser = clap::value_parser!(u32).range(1..))]
        run_records: Vec<u32>,
        /// Whether the pull CTAs join the tiles once the pull is done (`MoeOptions::join`), the
        /// values to try: on, off or both.
        #[arg(long, value_delimiter = ',', default_value = "on,off",
              value_parser = clap::builder::BoolishValueParser::new())]
        join: Vec<bool>,
        #[command(flatten)]
        ranks: RanksArgs,
        #[command(flatten)]
        timing: TuneTimingArgs,
        /// Where the table goes (JSON lines; append it to host/ops/tuned/moe.jsonl).
        #[arg(long, default_value = "moe.jsonl")]
        out: PathBuf,
    },
}

/// `mkernel plot`.
#[derive(Args, Debug)]
struct PlotArgs {
    /// JSON-lines files (from `mkernel bench --json` and `torch_baselines.py --json`).
    #[arg(required = true)]
    inputs: Vec<PathBuf>,
    /// Folder for the charts.
    #[arg(long, default_value = "docs/plots")]
    out: PathBuf,
}

#[derive(Subcommand, Debug)]
pub enum RankCheckCmd {
    /// Three rounds of bootstrap all-gathers of rank-encoded blobs, then a barrier.
    Bootstrap {
        /// Bound on each bootstrap step.
        #[arg(long = "timeout-ms", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
        timeout_ms: u64,
    },
    /// The all-gather on fresh rank-encoded data, poisoned outputs, then launches back to back.
    Allgather {
        /// Bytes per rank.
        #[arg(long = "shard-bytes", default_value = "1000003", value_parser = args::size)]
        shard_bytes: usize,
        /// Checked launches.
        #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
        iters: u32,
        /// CTAs copying over NVLink (default: the op's, by copy and shard size).
        #[arg(long = "intra-ctas", value_parser = clap::value_parser!(u32).range(1..=1024))]
        intra_ctas: Option<u32>,
        /// How they copy.
        #[arg(long, value_enum, default_value_t = CopyArg::Auto)]
        copy: CopyArg,
        /// Gather in place.
        #[arg(long = "in-place")]
        in_place: bool,
        /// Bytes per FIFO write to other nodes.
        #[arg(long = "chunk-bytes", default_value = "256K", value_parser = args::size)]
        chunk_bytes: usize,
        /// Bound on each bootstrap step and device wait.
        #[arg(long = "timeout-ms", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
        timeout_ms: u64,
        /// Launch through one captured CUDA graph, replayed for every launch.
        #[arg(long)]
        graph: bool,
        /// Failure check instead: this rank builds the op but never launches it; every other rank
        /// must get a device-wait report naming it (after --timeout-ms), not hang or return data.
        #[arg(long = "absent-rank")]
        absent_rank: Option<u32>,
    },
    /// AllGather + GEMM on fresh rank-encoded data against the unfused path and a host reference.
    AgGemm(cmd_ag_gemm::CheckArgs),
    /// GEMM + ReduceScatter against the unfused path and the precision contract.
    GemmRs(cmd_gemm_rs::CheckArgs),
    /// GEMM + AllReduce against the unfused path and the precision contract.
    GemmAr(cmd_gemm_rs::CheckArgs),
    /// MoE dispatch + grouped GEMM: layout row by row, dispatched rows bit for bit, outputs
    /// against the unfused path and a host reference.
    Moe(cmd_moe::CheckArgs),
    /// Ring attention: every rank's rows against the single-GPU kernel on the whole sequence and
    /// an f64 reference, then back-to-back launches.
    RingAttention(cmd_ring::CheckArgs),
    /// Thousands of back-to-back launches of each op: no drift in time, no leak of device memory
    /// or file descriptors, the same output at the end.
    Soak(cmd_soak::SoakArgs),
}

/// Let a closed stdout end the process quietly (`mkernel info | head`), as Unix tools do, instead
/// of a panic in `println!`. Only for commands that open no socket and start no process: there a
/// peer that goes away must come back as an error naming it, not as a silent death by SIGPIPE.
fn quiet_on_closed_pipe() {
    // SAFETY: sets the default disposition of one signal; no handler of ours is replaced.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Info => {
            quiet_on_closed_pipe();
            cmd_info::info()
        }
        Cmd::Launch(a) => cmd_rank::launch(a),
        Cmd::Bench(b) => bench(b),
        Cmd::Tune(TuneCmd::AgGemm { shapes, push_ctas, chunk_rows, ranks, timing, out }) => {
            cmd_ag_gemm::tune(&shapes, &push_ctas, &chunk_rows, &ranks, timing.tune_timing(), &out)
        }
        Cmd::Tune(TuneCmd::GemmRs(a)) => a.run(mkernel::ops::gemm_rs::Collective::ReduceScatter),
        Cmd::Tune(TuneCmd::GemmAr(a)) => a.run(mkernel::ops::gemm_rs::Collective::AllReduce),
        Cmd::Tune(TuneCmd::Moe { configs, pull_ctas, run_records, join, ranks, timing, out }) => {
            cmd_moe::tune(&configs, (&pull_ctas, &run_records, &join), &ranks, timing.tune_timing(), &out)
        }
        Cmd::Plot(p) => plot::plot(&p.inputs, &p.out).map(|s| {
            quiet_on_closed_pipe();
            for f in &s.files {
                println!("{}", f.display());
            }
            eprintln!(
                "plot: {} records drawn, {} lines not recognised, {} baseline values matched no chart, {} bars \
                 given twice (the later kept)",
                s.records, s.skipped, s.unmatched, s.replaced
            );
            if !s.no_reference.is_empty() {
                eprintln!("plot: not drawn (no mkernel series to divide by): {}", s.no_reference.join(", "));
            }
        }),
        Cmd::RankCheck(c) => cmd_rank::rank_check(c),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mkernel: {e:#}");
            let no_device = e.chain().any(|c| {
                c.downcast_ref::<mkernel::GpuError>().is_some_and(|g| g.is_no_device())
                    || c.downcast_ref::<mkernel::Error>()
                        .is_some_and(|m| matches!(m, mkernel::Error::Gpu(g) if g.is_no_device()))
            });
            // A launcher stopped by a signal exits like a shell reports one: 128 + the signal.
            let signal = e.chain().find_map(|c| match c.downcast_ref::<mkernel::comm::CommError>() {
                Some(mkernel::comm::CommError::Interrupted { signal, .. }) => Some(*signal),
                _ => None,
            });
            match signal {
                Some(s) => ExitCode::from(128u8.saturating_add(s.clamp(0, 127) as u8)),
                None => ExitCode::from(if no_device { EXIT_NO_DEVICE } else { 1 }),
            }
        }
    }
}

fn bench(b: BenchCmd) -> anyhow::Result<()> {
    match b {
        BenchCmd::Gemm { shapes, layouts, split_k, ring, tile_n, stream_k, gather, timing, json } => {
            let opts = mkernel::gemm::GemmOptions {
                split_k,
                deep_ring: ring.map(|r| r == "deep"),
                tile_n,
                stream_k: stream_k.is_some_and(|s| s == "on"),
                ..Default::default()
            };
            cmd_bench::gemm(&shapes, &layouts, opts, gather, timing.timing(), json.as_deref())
        }
        BenchCmd::Attention { configs, layouts, masks, ctas, timing, json } => {
            cmd_bench::attention(&configs, &layouts, &masks, ctas, timing.timing(), json.as_deref())
        }
        BenchCmd::Allgather { sizes, intra_ctas, copy, in_place, ranks, timing, json } => {
            let how = cmd_bench::AllgatherHow { intra_ctas, copy, in_place };
            cmd_bench::allgather(&sizes, how, &ranks, timing.timing(), json.as_deref())
        }
        BenchCmd::AgGemm { shapes, layouts, knobs, in_place, ranks, timing, json, trace } => {
            cmd_ag_gemm::bench(&shapes, &layouts, &knobs, in_place, &ranks, timing.timing(), json.as_deref(), &trace)
        }
        BenchCmd::GemmRs(a) => a.run(mkernel::ops::gemm_rs::Collective::ReduceScatter),
        BenchCmd::GemmAr(a) => a.run(mkernel::ops::gemm_rs::Collective::AllReduce),
        BenchCmd::Moe { configs, layouts, routing, knobs, ranks, timing, json, trace } => {
            cmd_moe::bench(&configs, &layouts, routing, &knobs, &ranks, timing.timing(), json.as_deref(), &trace)
        }
        BenchCmd::RingAttention { configs, masks, comm_ctas, slots, split_tiles, ranks, timing, json } => {
            let knobs = (comm_ctas, slots, split_tiles);
            cmd_ring::bench(&configs, &masks, knobs, &ranks, timing.timing(), json.as_deref())
        }
        BenchCmd::Fifo { blocks, threads, per_thread, rounds, matrix } => {
            cmd_bench::fifo(blocks, threads, per_thread, rounds, matrix)
        }
        BenchCmd::StreamWait { raises, period_us, runs, peer_mib } => {
            cmd_bench::stream_wait(raises, period_us, runs, peer_mib)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn clap_definition_is_consistent() {
        Cli::command().debug_assert();
    }

    fn err(args: &[&str]) -> String {
        let e = Cli::try_parse_from(std::iter::once("mkernel").chain(args.iter().copied())).unwrap_err();
        e.to_string()
    }

    #[test]
    fn bad_values_name_their_flag_and_rule() {
        let e = err(&["bench", "gemm", "--shapes", "0x0x0"]);
        assert!(e.contains("--shapes") && e.contains("M must be at least 1"), "{e}");
        let e = err(&["bench", "gemm", "--reps", "0"]);
        assert!(e.contains("--reps") && e.contains("0 is not in 1..=100000"), "{e}");
        let e = err(&["bench", "allgather", "--sizes", "abc"]);
        assert!(e.contains("--sizes") && e.contains("not a size"), "{e}");
        let e = err(&["bench", "gemm", "--layouts", "xy"]);
        assert!(e.contains("--layouts") && e.contains("`nk`"), "{e}");
        let e = err(&["launch", "-n", "-1", "--", "true"]);
        assert!(e.contains("--nprocs") && e.contains("-1 is not in 1..=1024"), "{e}");
        let e = err(&["launch", "--timeout", "2", "-n", "2", "--", "true"]);
        assert!(e.contains("--timeout"), "{e}");
    }

    #[test]
    fn launch_takes_the_program_with_or_without_dashes() {
        for args in [&["launch", "-n", "2", "--", "prog", "-x"][..], &["launch", "-n", "2", "prog", "-x"]] {
            let cli = Cli::try_parse_from(std::iter::once("mkernel").chain(args.iter().copied())).unwrap();
            let Cmd::Launch(l) = cli.cmd else { panic!("not launch") };
            assert_eq!(l.command, ["prog", "-x"]);
            assert_eq!(l.timeout_s, 900);
        }
    }

    #[test]
    fn device_barrier_only_where_honoured() {
        for bench in ["allgather", "ag-gemm", "gemm-rs", "gemm-ar", "moe"] {
            let cli = Cli::try_parse_from(["mkernel", "bench", bench, "--device-barrier"]).unwrap();
            let Cmd::Bench(cmd) = cli.cmd else { panic!("not bench") };
            let on = match cmd {
                BenchCmd::Allgather { timing, .. } | BenchCmd::AgGemm { timing, .. } | BenchCmd::Moe { timing, .. } => {
                    timing.timing().device_barrier
                }
                BenchCmd::GemmRs(a) | BenchCmd::GemmAr(a) => a.timing.timing().device_barrier,
                _ => panic!("{bench}: another command"),
            };
            assert!(on, "{bench}");
        }
        for args in [&["bench", "gemm", "--device-barrier"][..], &["tune", "gemm-rs", "--device-barrier"]] {
            let e = err(args);
            assert!(e.contains("unexpected argument '--device-barrier'"), "{args:?}: {e}");
        }
    }

    #[test]
    fn gemm_rs_knobs_reach_the_options() {
        let cli = Cli::try_parse_from([
            "mkernel",
            "bench",
            "gemm-ar",
            "--lead",
            "all",
            "--one-shot",
            "off",
            "--push",
            "on",
            "--prefetch",
            "off",
            "--inter-reduce",
            "3",
            "--pull-reduced",
            "on",
        ])
        .unwrap();
        let Cmd::Bench(BenchCmd::GemmAr(a)) = cli.cmd else { panic!("not bench gemm-ar") };
        let o = a.knobs.options(Default::default());
        assert_eq!((o.one_shot, o.push, o.prefetch, o.inter_reduce), (Some(false), Some(true), Some(false), Some(3)));
        assert_eq!(o.pull_reduced, Some(true));
        assert!(o.lead.is_some());
    }

    #[test]
    fn help_is_not_an_error() {
        for args in [&["--help"][..], &["launch", "--help"], &["bench", "gemm", "--help"]] {
            let e = Cli::try_parse_from(std::iter::once("mkernel").chain(args.iter().copied())).unwrap_err();
            assert_eq!(e.exit_code(), 0, "{args:?}");
        }
    }
}
