//! AllGather + GEMM, tensor parallelism's first projection: rank r holds `A_r[M/W, K]` and its
//! own `B` (`[K, N]` or `[N, K]`); every rank gets `C[M, N] = allgather(A) @ B` and the gathered
//! `A[M, K]` (a backward pass needs it).
//!
//! The fused path is ONE persistent launch (`device/src/kernels/ag_gemm.rs`): compute CTAs run the
//! GEMM engine over the gathered A, taking local rows first and remote rows in arrival order,
//! each tile waiting only for the chunks of rows it reads; push CTAs copy the shard into the node's
//! peers over NVLink; with several nodes an inter-send CTA hands it to the proxy for the other
//! nodes and forward CTAs pass what arrives on to the node's other ranks. With
//! [`AgGemmOptions::engines`] the copy engines move the shard inside the node instead of push CTAs
//! (a side stream beside the launch raises the same flags). The unfused path (our
//! all-gather, then our GEMM) is the reference and the fallback for shapes where fusing loses;
//! [`AgGemm::path`] says which one runs.
//!
//! ```no_run
//! # fn main() -> Result<(), mkernel::Error> {
//! use mkernel::comm::{communicator::{CommOptions, Communicator}, world::World};
//! use mkernel::gemm::{BLayout, GemmShape, Output};
//! use mkernel::ops::ag_gemm::{AgGemm, AgGemmOptions, AgInput};
//! let world = World::from_env()?;
//! let gpu = mkernel::Gpu::new(world.device)?;
//! let comm = Communicator::new(&gpu, &world, CommOptions::default())?;
//! let shape = GemmShape { m: 16384, n: 4096, k: 8192 }; // M in all; this rank holds M / W rows
//! let rows = shape.m / world.world_size as usize;
//! let a = gpu.alloc::<half::bf16>(rows * shape.k)?;
//! let b = gpu.alloc::<half::bf16>(shape.k * shape.n)?;
//! let c = gpu.alloc::<half::bf16>(shape.m * shape.n)?;
//! let op = AgGemm::new(&comm, &gpu, shape, BLayout::KN, AgInput::Buffer(&a), &b, Output::Bf16(&c), AgGemmOptions::default())?;
//! op.run(&gpu)?; // C = allgather(A) @ B; op.gathered() holds allgather(A)
//! # Ok(()) }
//! ```
use super::allgather::{AllGather, AllGatherOptions};
use super::gemm::{plan, BLayout, Gemm, GemmOptions, GemmShape, Output};
use super::tuned;
use crate::abi::{
    AgEngineParams, AgGemmParams, RoleSplit, AG_ENGINE_ENTER, AG_ENGINE_FLAGS, FLAG_STRIDE, MAX_LOCAL_RANKS,
};
use crate::comm::communicator::{Communicator, HeapRegion};
use crate::comm::transport::NicModel;
use crate::comm::world::World;
use crate::error::{invalid, DiagBuffers, Result};
use crate::gpu::{kernels, DeviceBuffer, DeviceSlice, Gpu, LaunchConfig, TensorMap};
use crate::sched::{next_peer, KSplit, RowOrder, TailSplit, TileGrid, TileScheduler};
use half::bf16;
use mkernel_device::kernels_info::gemm::{
    split_half_bytes, SIDE_SMEM_BYTES, SMEM_BYTES, THREADS, TILE_K, TILE_M, TILE_N,
};
use std::time::Duration;

/// Where this rank's shard `A_r[M/W, K]` comes from.
#[derive(Clone, Copy)]
pub enum AgInput<'a> {
    /// A buffer of the caller's (read during every launch).
    Buffer(&'a crate::gpu::DeviceBuffer<bf16>),
    /// The caller writes its shard into [`AgGemm::shard`] (inside the gathered buffer) before
    /// each launch: nothing is copied locally.
    InPlace,
}

pub use super::{Path, PathChoice};

/// Tuning knobs; `None` takes the per-shape default ([`tuned`]).
#[derive(Clone, Debug)]
pub struct AgGemmOptions {
    /// CTAs pushing the shard over NVLink.
    pub push_ctas: Option<u32>,
    /// Rows per arrival flag (the granularity compute waits at).
    pub chunk_rows: Option<u32>,
    /// CTAs forwarding other nodes' shards inside the node (several nodes only).
    pub fwd_ctas: Option<u32>,
    /// Fused, unfused, or chosen per shape.
    pub path: PathChoice,
    /// Tile rows walked together (L2 reuse).
    pub group_m: u32,
    /// Bound on every device-side wait.
    pub timeout: Duration,
    /// Each push CTA copies a chunk to every other local rank at once, loading each piece once
    /// (`AgGemmParams::fan`), instead of one rank at a time. Off by default: on 4x H200 it made
    /// no difference at the default push CTAs (overlap 1.051-1.079 against 1.057-1.081), and 4
    /// push CTAs still could not keep up with it (1.126-1.132 at 16384x4096x8192).
    pub fan: bool,
    /// Compute CTAs claim tiles from a counter in schedule order (`AgGemmParams::dynamic`)
    /// instead of each walking a fixed share; `None`: with several nodes only (measured on 4x
    /// H200, docs/PERF.md "Dynamic tile claiming").
    pub dynamic: Option<bool>,
    /// Push and forward CTAs run tiles too once their copies are out (`AgGemmParams::join`):
    /// drawn ones with `dynamic`; on a static walk a share of the tiles from the compute CTAs'
    /// wave `join_wave` on (`sched::TileIter::joined`). `None`: whenever `dynamic`.
    pub join: Option<bool>,
    /// A static walk with `join`: the compute CTAs' wave from which the push and forward CTAs
    /// share the tiles. Late CTAs delay their share, early ones change nothing; `None`: the wave
    /// by which the copies should be out at the rule of thumb's rates ([`static_join_wave`]).
    /// A push CTA whose copy timed out (reported; the launch has failed) leaves its share
    /// unwalked.
    pub join_wave: Option<u32>,
    /// K-blocks before a tile's last load at which the tile's CTA claims its next tile
    /// (`AgGemmParams::claim_ahead`; 0: at the tile boundary).
    pub claim_ahead: u32,
    /// Cut the tiles past the last full wave of the claiming CTAs into k-ranges over all of them
    /// (stream-K, `sched::TailSplit`), instead of running them whole on a few CTAs while the
    /// rest idle. Only where no tail tile reads this rank's own rows (their A is written out by
    /// the tiles that load it whole), and never on a static walk joined late (`Some(true)` is
    /// then an error). `None`: on a static walk whose tail fills at most
    /// [`TAIL_MAX_FILL_PCT`] of a wave. On 4x H200 it took 1 x 4 from 1.089 to 1.066 of
    /// max(GEMM alone, all-gather alone) at 16384x4096x8192 (a quarter-wave tail), cost 1% where
    /// the tail filled 63-75% of a wave, and made the drawn walk across two emulated nodes 1-4%
    /// slower (docs/PERF.md).
    pub tail_split: Option<bool>,
    /// The arrival tail: the walk's last `tail_rows` tile rows (with several nodes the rows that
    /// land last, the walk taking remote rows in arrival order) walked one after another, each
    /// of their tiles cut into `tail_ways` k-ranges ([`Tail::arrivals`]). When those rows land,
    /// the CTAs waiting for them share their tiles, instead of each tile running whole on one
    /// CTA while the rest idle. The drawn walk only (`dynamic`), not with `tail_split`, and never
    /// over a tile row that reads this rank's own rows (typed errors). The cut tiles' f32 sums run
    /// in another order than a whole tile's (within rounding of the unfused path's, as the
    /// stream-K tail's). `Some(0)`: none. `None`: [`ARRIVAL_TAIL_ROWS`] rows cut
    /// [`ARRIVAL_TAIL_WAYS`] ways where the link bounds the launch
    /// ([`arrival_tail_by_default`]), else none. On 4x H200 across two emulated nodes of one
    /// rank, 2 rows cut 2 ways took 16384x4096x8192 from 1.052-1.056 to 1.040-1.047 of max(GEMM
    /// alone, modelled link) and 32768x4096x8192 from 1.025-1.027 to 1.020-1.022. Where the GEMM
    /// is about as long as the link or longer it read level or up to 2% slower at five of six
    /// points, and 2% faster at 8192^3 across one-rank nodes, whose link/GEMM ratio
    /// 16384x8192x8192 shares (0.7% slower there), so the rule leaves both off (docs/PERF.md,
    /// "The arrival tail").
    pub tail_rows: Option<u32>,
    /// K-ranges per tile of the arrival tail, 2 to [`TAIL_WAYS_MAX`]; `None`:
    /// [`ARRIVAL_TAIL_WAYS`].
    pub tail_ways: Option<u32>,
    /// The compute CTAs copy part of the shard themselves (`AgGemmParams::spread`): the two spare
    /// warps of the producer warpgroup of every `spread_every`-th compute CTA copy units of
    /// `spread_unit` bytes, chunk-major, into every local rank's gathered A with 16-byte loads and
    /// stores, the last unit of a chunk raising its flag; the push CTAs (`push_ctas`, default
    /// [`SPREAD_PUSH_CTAS`]) copy every `spread_push_every`-th chunk. So few push CTAs leave
    /// 128 compute CTAs (a divisor of the large shapes' tiles: no partial wave), and each
    /// copying SM gives the GEMM only a little. `None`: on one node of four ranks or more. On
    /// 4x H200 it took the overlap from 1.013-1.067 to 1.007-1.019 at the four large shapes
    /// (docs/PERF.md); every compute CTA copying with no push CTA, or copying with TMA bulk
    /// copies (which stall the SM's own loads behind the NVLink writes), were 1.06-1.45.
    pub spread: Option<bool>,
    /// Bytes per unit with `spread` (a multiple of 16); `None`: [`SPREAD_UNIT`].
    pub spread_unit: Option<u32>,
    /// With `spread`: only every `spread_every`-th compute CTA copies; `None`:
    /// [`SPREAD_EVERY`].
    pub spread_every: Option<u32>,
    /// With `spread` and push CTAs: the push CTAs copy every `spread_push_every`-th chunk (from
    /// the first), the compute CTAs the rest; `None`: every other chunk.
    pub spread_push_every: Option<u32>,
    /// The copy engines move this rank's shard into every local rank's gathered A (and into its
    /// own, unless in place) instead of push CTAs (`AgGemmParams::engines`): on a side stream
    /// forked from the caller's, a one-CTA launch raises `ready` and waits for every local
    /// peer's, then the shard goes peer after peer (each rank starting at the next), in pieces
    /// of about [`ENGINE_PIECE_BYTES`] chunk-aligned, each piece's arrival flags raised by a
    /// one-CTA launch behind it; the stream joins back after the fused launch. Every SM but one
    /// (left to those one-CTA launches, which the tiles wait for) then computes; with several
    /// nodes the forward and inter-send CTAs stay. The tiles that load this rank's rows write
    /// them into its gathered A (a copy within one GPU runs on SMs), so with several nodes,
    /// where the proxy sends from that copy at once, only in place. Not with `spread`,
    /// `push_ctas` or `fan` (typed errors). `None`: off.
    pub engines: Option<bool>,
}

/// The copy engines' piece of a shard ([`AgGemmOptions::engines`]): each piece's chunks are
/// flagged once it is in, so a peer's tiles of the first rows start before the whole shard
/// landed.
pub const ENGINE_PIECE_BYTES: u64 = 64 << 20;
/// The most pieces a shard is copied in per peer ([`ENGINE_PIECE_BYTES`]).
pub const ENGINE_PIECES_MAX: u32 = 8;
/// Threads of a copy-engine step's one CTA (a flag step raises a chunk's flag per thread).
const ENGINE_THREADS: u32 = 128;

/// The copy engines' pieces of a shard of `shard_bytes` in `chunks` chunks: chunk ranges
/// `first..end`, in order, covering every chunk once.
pub fn engine_pieces(chunks: u32, shard_bytes: u64) -> Vec<(u32, u32)> {
    let pieces = (shard_bytes.div_ceil(ENGINE_PIECE_BYTES) as u32).clamp(1, ENGINE_PIECES_MAX).min(chunks.max(1));
    (0..pieces).map(|i| (i * chunks / pieces, (i + 1) * chunks / pieces)).filter(|(a, b)| b > a).collect()
}

/// Default bytes per unit of a spread copy ([`AgGemmOptions::spread_unit`]): a 2 MiB chunk
/// (128 rows at K = 8192) goes out from 32 SMs at once.
pub const SPREAD_UNIT: u32 = 64 << 10;
/// Default copying compute CTAs with `spread`: every sixth (22 of 128). Every third or fourth
/// cost the GEMM more than the copies needed (1.04-1.09 against 1.007-1.019 of max(GEMM alone,
/// all-gather alone) on 4x H200); every eighth was level.
pub const SPREAD_EVERY: u32 = 6;
/// Default push CTAs with `spread`, taking every other chunk.
pub const SPREAD_PUSH_CTAS: u32 = 4;

impl Default for AgGemmOptions {
    fn default() -> Self {
        Self {
            push_ctas: None,
            chunk_rows: None,
            fwd_ctas: None,
            path: PathChoice::Auto,
            group_m: 8,
            timeout: Duration::from_secs(10),
            fan: false,
            dynamic: None,
            join: None,
            join_wave: None,
            claim_ahead: 4,
            tail_split: None,
            tail_rows: None,
            tail_ways: None,
            spread: None,
            spread_unit: None,
            spread_every: None,
            spread_push_every: None,
            engines: None,
        }
    }
}

/// The role split and granularity a launch uses (options resolved against the shape).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Split {
    /// Compute CTAs.
    pub compute: u32,
    /// NVLink push CTAs.
    pub push: u32,
    /// Forward CTAs.
    pub fwd: u32,
    /// Inter-send CTAs (1 with several nodes).
    pub inter_send: u32,
    /// Rows per arrival flag.
    pub chunk_rows: u32,
    /// The compute CTAs copy part of the shard (`AgGemmOptions::spread`; the push CTAs the rest).
    pub spread: bool,
    /// The copy engines copy the shard inside the node (`AgGemmOptions::engines`; no push CTAs).
    pub engines: bool,
}

/// The copy engines' side of the fused launch ([`AgGemmOptions::engines`]).
struct Engines {
    /// A handle on the same GPU with a stream of its own: the peers' copies.
    side: Gpu,
    /// Another: the copy into this rank's own gathered A, beside the peers' (out of place).
    local: Gpu,
    /// The enter step's launch counter, then the epoch word it leaves for the flag steps.
    words: DeviceBuffer<u64>,
    /// Chunk ranges copied and flagged one after another ([`engine_pieces`]).
    pieces: Vec<(u32, u32)>,
    /// A launch was enqueued only in part: the side stream's launch count no longer matches the
    /// fused kernel's, so every later launch is refused.
    broken: std::sync::atomic::AtomicBool,
}

/// The unfused path's pieces, over the fused path's gathered buffer.
struct Unfused<'a> {
    ag: AllGather<'a>,
    gemm: Gemm<'a>,
}

/// A bound AllGather + GEMM (see the module docs): validated, planned and allocated once,
/// launched many times.
pub struct AgGemm<'a> {
    comm: &'a Communicator,
    shape: GemmShape,
    path: Path,
    split: Split,
    input: AgInput<'a>,
    // Declared before `gathered`: it refers to that memory and is dropped first.
    unfused: Unfused<'a>,
    gathered: HeapRegion<'a>,
    _flags: HeapRegion<'a>,
    _row_order: DeviceBuffer<u32>,
    _launches: DeviceBuffer<u64>,
    _tile_counters: DeviceBuffer<u32>,
    tail: Tail,
    /// With `spread`: the per-chunk unit counters (`AgGemmParams::spread_counters`).
    _spread_counters: DeviceBuffer<u32>,
    /// The tail's f32 partials and arrival counters (`AgGemmParams::tail_workspace`).
    _tail_buffers: (DeviceBuffer<f32>, DeviceBuffer<u32>),
    _maps: DeviceBuffer<TensorMap>,
    _local_map: Option<DeviceBuffer<TensorMap>>,
    diag: DiagBuffers,
    params: AgGemmParams,
    kernel: kernels::Kernel<AgGemmParams>,
    engines: Option<Engines>,
}

/// Whether tile row `tm` (rows `tm * TILE_M ..` of `m`) holds any of rank `rank`'s rows.
fn tile_reads_rank(tm: u32, m: u32, shard_rows: u32, rank: u32) -> bool {
    let (first, end) = (tm * TILE_M, ((tm + 1) * TILE_M).min(m));
    first < (rank + 1) * shard_rows && end > rank * shard_rows
}

/// The largest share of a wave (percent of the claiming CTAs) a stream-K tail fills by default.
/// Its units' partial sums cost about a third to a half of a tile's time (measured on 4x H200:
/// a quarter-wave tail saved 2.7%, tails of 63% and 75% of a wave cost 1%, one of 51% saved
/// 0.6-0.9%), so a fuller last wave is left whole.
pub const TAIL_MAX_FILL_PCT: u32 = 55;

/// The most k-ranges an arrival-tail tile is cut into ([`AgGemmOptions::tail_ways`]): each
/// adds an f32 partial of the tile to the workspace and to the tile's sum.
pub const TAIL_WAYS_MAX: u32 = 8;
/// K-ranges per arrival-tail tile by default ([`AgGemmOptions::tail_ways`]).
pub const ARRIVAL_TAIL_WAYS: u32 = 2;
/// Tile rows of the arrival tail where it is on by default ([`AgGemmOptions::tail_rows`]).
pub const ARRIVAL_TAIL_ROWS: u32 = 2;
/// The modelled link time over the GEMM's (at [`tuned::AG_GEMM_RATE`]) from which the arrival
/// tail is on by default: there the last rows land well after the GEMM could have finished, and
/// their tiles are the launch's end.
pub const ARRIVAL_TAIL_LINK_RATIO: f64 = 1.5;

/// The fewest waves of output tiles (on the GPU's SMs) for which the arrival tail is on by
/// default: it was measured on 16-32 waves; short launches are left as they were.
pub const ARRIVAL_TAIL_MIN_WAVES: u32 = 8;

/// Whether the arrival tail is on by default: several nodes, at least
/// [`ARRIVAL_TAIL_MIN_WAVES`] waves of tiles on `sms` SMs, and this rank's shard takes at least
/// [`ARRIVAL_TAIL_LINK_RATIO`] times the GEMM's time to cross to every other node over one
/// 400 Gb/s NIC ([`NicModel::cx7`]).
pub fn arrival_tail_by_default(shape: GemmShape, world: &World, sms: u32) -> bool {
    let shard_bytes = (shape.m / world.world_size.max(1) as usize * shape.k * 2) as u64;
    let link_s = NicModel::cx7().transfer_time(shard_bytes * (world.nodes.max(1) as u64 - 1)).as_secs_f64();
    world.nodes > 1
        && tiles(shape) >= ARRIVAL_TAIL_MIN_WAVES * sms.max(1)
        && link_s >= ARRIVAL_TAIL_LINK_RATIO * shape.flops() / tuned::AG_GEMM_RATE
}

/// The fused walk's stream-K tail (`sched::TailSplit`, `AgGemmParams::tail_dp`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    /// Schedule positions taken whole.
    pub dp: u32,
    /// The output tiles (tile row, tile column) cut into k-ranges after them, in walk order:
    /// their f32 sums run in another order than a whole tile's, so they may differ from the
    /// unfused path's by rounding.
    pub tiles: Vec<(u32, u32)>,
    /// f32 partial slots per half tile.
    pub slots: u32,
    /// The k-ranges it is cut into (`AgGemmParams::tail_ranges`): 0 for a stream-K tail over
    /// the claiming CTAs ([`Tail::plan`]), tiles x ways for an arrival tail ([`Tail::arrivals`]).
    pub ranges: u32,
    /// An arrival tail's tile rows (`AgGemmParams::tail_rows`; 0 for a stream-K tail).
    pub rows: u32,
}

impl Tail {
    /// The tail of `shape`'s tiles in `order`'s grouped raster over `ctas` claiming CTAs, unless
    /// a tail tile row is `local` (its A is written out by the tiles that load it whole):
    /// `Some(true)` whenever there is one, `Some(false)` never, `None` when it fills at most
    /// [`TAIL_MAX_FILL_PCT`] of a wave. No tail: `dp` = every tile.
    pub fn plan(
        shape: GemmShape,
        order: &[u32],
        group_m: u32,
        ctas: u32,
        wanted: Option<bool>,
        local: impl Fn(u32) -> bool,
    ) -> Tail {
        let grid = TileGrid::new(shape.m as u32, shape.n as u32, TILE_M, TILE_N, group_m);
        let walk = RowOrder { grid, rows: order.as_ptr(), tail_rows: 0 };
        let k_blocks = (shape.k as u32).div_ceil(TILE_K);
        let ctas = ctas.max(1);
        let fill_ok = grid.count() % ctas * 100 <= ctas * TAIL_MAX_FILL_PCT;
        let split = TailSplit::new(walk, grid, k_blocks, ctas, wanted.unwrap_or(fill_ok));
        let tail = Self::of(walk, split, 0);
        if tail.tiles.iter().any(|&(tm, _)| local(tm)) {
            return Self::of(walk, TailSplit::at(walk, grid, k_blocks, ctas, grid.count()), 0);
        }
        tail
    }

    /// The arrival tail ([`AgGemmOptions::tail_rows`]): the last `rows` tile rows of `order`
    /// (at most its tile rows) walked one after another after the grouped rest, each tile cut
    /// into `ways` k-ranges. The caller keeps those rows off this rank's own
    /// ([`arrival_tail_rows_max`]).
    pub fn arrivals(shape: GemmShape, order: &[u32], group_m: u32, rows: u32, ways: u32) -> Tail {
        let grid = TileGrid::new(shape.m as u32, shape.n as u32, TILE_M, TILE_N, group_m);
        let rows = rows.min(grid.m_tiles);
        let walk = RowOrder { grid, rows: order.as_ptr(), tail_rows: rows };
        let k_blocks = (shape.k as u32).div_ceil(TILE_K);
        let tiles = rows * grid.n_tiles;
        let ranges = tiles * ways.max(1);
        let split = TailSplit::at(walk, grid, k_blocks, ranges.max(1), grid.count() - tiles);
        Self::of(walk, split, if tiles == 0 { 0 } else { ranges })
    }

    /// `split`'s tail over `walk` (cut into `ranges` k-ranges for an arrival tail, else 0).
    fn of(walk: RowOrder, split: TailSplit<RowOrder>, ranges: u32) -> Tail {
        let count = walk.count();
        // `walk.tile` reads `order`, which has one entry per tile row of the grid.
        let tiles: Vec<(u32, u32)> = (split.dp..count).map(|i| walk.tile(i)).map(|t| (t.m, t.n)).collect();
        if tiles.is_empty() {
            return Tail { dp: count, tiles, slots: 1, ranges: 0, rows: 0 };
        }
        let rows = if ranges == 0 { 0 } else { walk.tail_rows };
        Tail { dp: split.dp, tiles, slots: split.slots(), ranges, rows }
    }

    /// Tail tiles (0: none).
    pub fn count(&self) -> u32 {
        self.tiles.len() as u32
    }

    /// f32 words of the tail's partials: `2 x tiles x slots` half tiles.
    pub fn workspace_floats(&self) -> usize {
        (2 * self.count() * self.slots) as usize * split_half_bytes(TILE_N) as usize / 4
    }
}

/// The most tile rows an arrival tail may take: the last positions of `order` whose tile rows
/// are not `local` (holding this rank's rows: its A is written out by the tiles that load it
/// whole, and a tile cut into k-ranges is no such tile), as [`Tail::plan`] takes them.
pub fn arrival_tail_rows_max(order: &[u32], local: impl Fn(u32) -> bool) -> u32 {
    order.iter().rev().take_while(|&&tm| !local(tm)).count() as u32
}

/// Tile rows in the order compute CTAs walk them: rows whose data is on this rank first, then
/// rows of this node's other ranks, then rows from other nodes; within each, by chunk index (the
/// order chunks arrive in), then by distance from this rank; with the copy engines
/// ([`AgGemmOptions::engines`]) the node's other ranks' rows shard by shard, in the order the
/// engines bring them. A tile row spanning several chunks sorts by the latest of them.
pub fn row_order(m: u32, shard_rows: u32, chunk_rows: u32, world: &World, engines: bool) -> Vec<u32> {
    let w = world.world_size;
    let lw = world.local_world_size.max(1);
    let key = |row: u32| {
        let s = row / shard_rows;
        let c = (row - s * shard_rows) / chunk_rows;
        if s == world.rank {
            (0, c, 0)
        } else if world.is_local(s) && engines {
            // The copy engines bring the node's shards whole, one after another: at step k
            // local rank l copies into l + k, so this rank gets local rank `local_rank - k`'s.
            let from = s % lw;
            (1, (world.local_rank + lw - from) % lw, c)
        } else {
            (if world.is_local(s) { 1 } else { 2 }, c, (s + w - world.rank) % w)
        }
    };
    let tiles = m.div_ceil(TILE_M);
    let mut keyed: Vec<((u32, u32, u32), u32)> = (0..tiles)
        .map(|t| {
            let (first, end) = (t * TILE_M, ((t + 1) * TILE_M).min(m));
            // The tile's rows touch a few chunks; its readiness is that of the latest one.
            let mut k = key(first);
            let mut row = first;
            while row < end {
                k = k.max(key(row));
                let s = row / shard_rows;
                row =
                    (s * shard_rows + ((row - s * shard_rows) / chunk_rows + 1) * chunk_rows).min((s + 1) * shard_rows);
            }
            (k, t)
        })
        .collect();
    keyed.sort();
    keyed.into_iter().map(|(_, t)| t).collect()
}

impl<'a> AgGemm<'a> {
    /// Collective: validate (typed errors name the argument and the rule), agree on the shape
    /// across ranks (an error names the ranks that differ), allocate the gathered A and the flags
    /// from the communicator's heap, encode the tensor maps. Nothing runs yet. `shape.m` is the
    /// whole M: this rank's shard has `M / world` rows.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &'a Communicator,
        gpu: &Gpu,
        shape: GemmShape,
        b_layout: BLayout,
        input: AgInput<'a>,
        b: impl Into<DeviceSlice<'a, bf16>>,
        c: Output<'a>,
        opts: AgGemmOptions,
    ) -> Result<Self> {
        let world = comm.world().clone();
        let b = b.into();
        let w = world.world_size as usize;
        if !shape.m.is_multiple_of(w) || shape.m == 0 {
            return Err(invalid(
                "m",
                format!("{} must be a positive multiple of the world size {w} (each rank holds M / {w} rows)", shape.m),
            ));
        }
        shape.validate(usize::MAX, b.len(), c.len())?;
        let shard_rows = shape.m / w;
        if let AgInput::Buffer(a) = input {
            if a.len() < shard_rows * shape.k {
                return Err(invalid(
                    "a",
                    format!(
                        "holds {} elements; this rank's shard is {shard_rows} x {} = {}",
                        a.len(),
                        shape.k,
                        shard_rows * shape.k
                    ),
                ));
            }
        }
        if world.local_world_size as usize > MAX_LOCAL_RANKS {
            return Err(invalid(
                "world",
                format!("{} ranks per node; at most {MAX_LOCAL_RANKS}", world.local_world_size),
            ));
        }
        if opts.group_m == 0 {
            return Err(invalid("group_m", "must be at least 1"));
        }
        let split = resolve(
            &opts,
            shape,
            &world,
            gpu.info().sm_count,
            matches!(input, AgInput::InPlace),
            Some(comm.transport()),
        )?;
        let spread_unit = opts.spread_unit.unwrap_or(SPREAD_UNIT);
        if split.spread {
            if spread_unit == 0 || !spread_unit.is_multiple_of(16) {
                return Err(invalid("spread_unit", format!("{spread_unit} bytes; must be a positive multiple of 16")));
            }
            let src = match input {
                AgInput::Buffer(a) => a.addr(),
                AgInput::InPlace => 0,
            };
            if split.chunk_rows as u64 * 2 * shape.k as u64 >= 1 << 32 {
                return Err(invalid("chunk_rows", "a chunk must stay under 4 GiB with `spread`"));
            }
            if !src.is_multiple_of(16) || !(2 * shape.k).is_multiple_of(16) {
                return Err(invalid(
                    "spread",
                    "the shard's address and rows (K * 2 bytes) must be multiples of 16 for its 16-byte copies",
                ));
            }
        }
        let path = match opts.path {
            PathChoice::Fused => Path::Fused,
            PathChoice::Unfused => Path::Unfused,
            PathChoice::Auto => tuned::ag_gemm(shape, &world, Some(comm.transport()))
                .map_or_else(|| tuned::ag_gemm_heuristic(shape, &world), |e| e.path),
        };
        let in_place = matches!(input, AgInput::InPlace);
        comm.agree(
            "shape",
            &format!(
                "ag_gemm {}x{}x{} {b_layout:?} {} out, {split:?}, in place {in_place}, {}",
                shape.m,
                shape.n,
                shape.k,
                if matches!(c, Output::F32(_)) { "f32" } else { "bf16" },
                path.name()
            ),
        )?;

        let row_bytes = 2 * shape.k;
        let gathered = comm.alloc(shape.m * row_bytes)?;
        let chunks = shard_rows.div_ceil(split.chunk_rows as usize) as u32;
        let words = AgGemmParams::flag_words(world.world_size, chunks).ok_or_else(|| {
            invalid(
                "chunk_rows",
                format!(
                    "{} rows a flag give {chunks} chunks a shard: their flag words for {} ranks do not fit in 32 bits",
                    split.chunk_rows, world.world_size
                ),
            )
        })?;
        let flags = comm.alloc(4 * words as usize)?;
        let order = row_order(shape.m as u32, shard_rows as u32, split.chunk_rows, &world, split.engines);
        let row_order_buf = gpu.upload(&order)?;
        let launches = gpu.upload(&[0u64])?;
        let tile_counters = gpu.upload(&[0u32; 2])?;
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let gopts = GemmOptions { ctas: None, group_m: opts.group_m, timeout: opts.timeout, ..Default::default() }
            .whole_tiles();
        let (mut gemm, maps) = plan(
            gpu,
            shape,
            b_layout,
            gathered.addr(),
            b.addr(),
            (&c).into(),
            &gopts,
            &diag,
            (crate::gpu::L2Promotion::B128, TILE_M),
        )?;
        gemm.roles = RoleSplit {
            compute: split.compute,
            intra_comm: split.push + split.fwd,
            inter_send: split.inter_send,
            inter_reduce: 0,
        };
        let shard_off = world.rank as u64 * shard_rows as u64 * row_bytes as u64;
        let mut params = AgGemmParams {
            gemm,
            gathered: gathered.addr(),
            flags: flags.addr(),
            shard_src: match input {
                AgInput::Buffer(a) => a.addr(),
                AgInput::InPlace => gathered.addr() + shard_off,
            },
            row_order: row_order_buf.addr(),
            launches: launches.addr(),
            tile_counters: tile_counters.addr(),
            fifo: comm.fifo_params(),
            gathered_heap_off: gathered.offset(),
            flags_heap_off: flags.offset(),
            shard_rows: shard_rows as u32,
            chunk_rows: split.chunk_rows,
            chunks,
            rank: world.rank,
            world: world.world_size,
            local_rank: world.local_rank,
            local_world: world.local_world_size,
            in_place: in_place as u32,
            fwd_ctas: split.fwd,
            comm_only: 0,
            ..Default::default()
        };
        for lr in 0..world.local_world_size {
            let r = world.local_to_global(lr);
            let missing = || invalid("world", format!("rank {r} is on this node but its heap is not mapped here"));
            params.peer_gathered[lr as usize] = gathered.peer(r).ok_or_else(missing)?;
            params.peer_flags[lr as usize] = flags.peer(r).ok_or_else(missing)?;
        }
        // Not in place: tiles whose rows are all this rank's read the caller's shard directly.
        let local_map = match input {
            AgInput::Buffer(a) => {
                let tile = super::gemm::bf16_sw128(
                    a.addr(),
                    [shape.k as u64, shard_rows as u64],
                    row_bytes as u64,
                    [TILE_K, TILE_M],
                );
                let m = gpu.upload_tensor_maps(&[tile])?;
                params.a_local_map = m.addr();
                Some(m)
            }
            AgInput::InPlace => None,
        };
        // One node: the local copy only serves the caller (compute reads the shard itself), so
        // the compute tiles that load the local rows write them from shared memory (no push CTA
        // reads them a second time) and the push CTAs copy what no tile covers, after the pushes.
        // Several nodes: the proxy sends from that copy, so the push CTAs make all of it first.
        params.local_copy_last = (world.nodes == 1) as u32;
        // Spread copies make the local copy with the rest.
        params.tiles_copy_local = (tiles_copy_local(&world, in_place) && !split.spread) as u32;
        params.engines = split.engines as u32;
        let engines = if split.engines {
            let shard_bytes = shard_rows as u64 * row_bytes as u64;
            Some(Engines {
                side: Gpu::new(gpu.info().ordinal)?,
                local: Gpu::new(gpu.info().ordinal)?,
                words: gpu.upload(&[0u64; 2])?,
                pieces: engine_pieces(chunks, shard_bytes),
                broken: Default::default(),
            })
        } else {
            None
        };
        params.spread = split.spread as u32;
        params.spread_unit = spread_unit;
        params.spread_every = opts.spread_every.unwrap_or(SPREAD_EVERY);
        // (`push` is at least 1: `resolve`.)
        params.spread_push_every = opts.spread_push_every.unwrap_or(2);
        params.plan_spread(split.compute);
        let spread_counters =
            gpu.upload(&vec![0u32; if split.spread { (chunks * FLAG_STRIDE) as usize } else { 1 }])?;
        params.spread_counters = spread_counters.addr();
        params.fan = opts.fan as u32;
        let (dynamic, join) = walk(&opts, &world)?;
        (params.dynamic, params.join) = (dynamic as u32, join as u32);
        if join && !dynamic {
            let wave = match opts.join_wave {
                Some(w) => w,
                None => static_join_wave(shape, &world, split, gpu.info().sm_count, in_place),
            };
            // Past the last wave the early walkers take every tile anyway: capped there, so
            // that the late walkers' first positions (`join_at` + their index) cannot wrap.
            params.join_at = wave.min(tiles(shape).div_ceil(split.compute.max(1))) * split.compute;
        }
        params.claim_ahead = opts.claim_ahead;
        let claiming = split.compute + if join { split.push + split.fwd } else { 0 };
        // A static walk joined late changes its stride at `join_at`: whole waves of the
        // claiming CTAs would not end at a multiple of them.
        let static_join = join && !dynamic;
        if static_join && opts.tail_split == Some(true) {
            return Err(invalid(
                "tail_split",
                "not with a static walk the push CTAs join late (`join` without `dynamic`)",
            ));
        }
        let wanted = if dynamic || static_join { opts.tail_split.or(Some(false)) } else { opts.tail_split };
        let local = |tm| tile_reads_rank(tm, shape.m as u32, shard_rows as u32, world.rank);
        let max_rows = arrival_tail_rows_max(&order, local);
        let tail = match arrival_tail(&opts, dynamic, shape, max_rows, (&world, gpu.info().sm_count))? {
            Some((rows, ways)) => Tail::arrivals(shape, &order, opts.group_m, rows, ways),
            None => Tail::plan(shape, &order, opts.group_m, claiming, wanted, local),
        };
        params.tail_dp = tail.dp;
        (params.tail_ranges, params.tail_rows) = (tail.ranges, tail.rows);
        let tail_workspace = gpu.alloc::<f32>(tail.workspace_floats().max(1))?;
        let tail_counters = gpu.upload(&vec![0u32; (2 * tail.count()).max(1) as usize])?;
        params.tail_workspace = tail_workspace.addr();
        params.tail_counters = tail_counters.addr();
        let kernel = b_layout.pick(kernels::AG_GEMM_KN, kernels::AG_GEMM_NK);

        // The unfused path gathers into the same buffer (in place) and multiplies from it.
        let ag_opts = AllGatherOptions { timeout: opts.timeout, chunk_bytes: 4 << 20, ..Default::default() };
        let ag = AllGather::in_region(comm, gpu, &gathered, shard_rows * row_bytes, ag_opts)?;
        // SAFETY: the gathered region lives in the communicator's heap (borrowed for 'a) and is
        // freed only when this op drops, after `unfused` (field order).
        let a_all = unsafe { DeviceSlice::<bf16>::from_raw(gathered.addr(), shape.m * shape.k) };
        let gemm_op = Gemm::new(gpu, shape, b_layout, a_all, b, c, gopts)?;
        comm.barrier()?;
        Ok(AgGemm {
            comm,
            shape,
            path,
            split,
            input,
            unfused: Unfused { ag, gemm: gemm_op },
            gathered,
            _flags: flags,
            _row_order: row_order_buf,
            _launches: launches,
            _tile_counters: tile_counters,
            tail,
            _spread_counters: spread_counters,
            _tail_buffers: (tail_workspace, tail_counters),
            _maps: maps,
            _local_map: local_map,
            diag,
            params,
            kernel,
            engines,
        })
    }

    /// The path [`AgGemm::launch`] runs.
    pub fn path(&self) -> Path {
        self.path
    }

    /// The role split of the fused path.
    pub fn split(&self) -> Split {
        self.split
    }

    /// The schedule position from which the push and forward CTAs share a static walk they
    /// join (`AgGemmParams::join_at`); None when they do not.
    pub fn join_at(&self) -> Option<u32> {
        (self.params.join != 0 && self.params.dynamic == 0).then_some(self.params.join_at)
    }

    /// The fused walk's stream-K tail (none: no tiles).
    pub fn tail(&self) -> &Tail {
        &self.tail
    }

    /// The shape (M in all).
    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    /// This rank's shard inside the gathered buffer: with [`AgInput::InPlace`], write it here
    /// before a launch.
    pub fn shard(&self) -> DeviceSlice<'_, bf16> {
        let rows = self.shape.m / self.comm.world().world_size as usize;
        let r = self.comm.world().rank as usize;
        self.gathered().slice(r * rows * self.shape.k..(r + 1) * rows * self.shape.k)
    }

    /// The gathered A `[M, K]`: after a launch completes, until the next one starts.
    pub fn gathered(&self) -> DeviceSlice<'_, bf16> {
        self.gathered.view::<bf16>().slice(0..self.shape.m * self.shape.k)
    }

    /// Enqueue one call on `gpu`'s stream through [`AgGemm::path`] (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        self.launch_path(gpu, self.path)
    }

    /// Enqueue one call through `path` (benches compare both).
    pub fn launch_path(&self, gpu: &Gpu, path: Path) -> Result<()> {
        match path {
            Path::Fused => self.launch_fused(gpu, &self.params),
            Path::Unfused => {
                self.stage_input(gpu)?;
                self.unfused.ag.launch(gpu)?;
                self.unfused.gemm.launch(gpu)
            }
        }
    }

    /// The fused kernel's communication alone (no tiles; ends when every chunk arrived): the
    /// "all-gather alone" of the overlap-efficiency figure. With `spread` the compute CTAs still
    /// launch, for their side warps' copies.
    pub fn launch_comm_only(&self, gpu: &Gpu) -> Result<()> {
        let mut p = self.params;
        p.comm_only = 1;
        p.join = 0;
        // No tiles: the copies make the whole local copy (with `spread` they always do).
        p.tiles_copy_local = 0;
        if p.spread != 0 {
            // The push CTAs and the copying compute CTAs' side warps copy as in the fused launch,
            // over an empty walk (M = 0: no tiles).
            p.gemm.m = 0;
            // And no tail: `RowOrder` keeps its detached rows within the (now empty) grid.
            (p.tail_dp, p.tail_ranges, p.tail_rows) = (0, 0, 0);
        } else {
            p.gemm.roles.compute = 0;
        }
        if p.engines != 0 {
            // One intra-comm CTA to wait for every chunk (it copies nothing).
            p.gemm.roles.intra_comm += 1;
        }
        self.launch_fused(gpu, &p)
    }

    /// The unfused path's all-gather alone (the standalone all-gather's defaults, in place into the
    /// gathered buffer).
    pub fn launch_allgather_only(&self, gpu: &Gpu) -> Result<()> {
        self.unfused.ag.launch(gpu)
    }

    /// How the unfused path's all-gather copies, and on how many CTAs (for the records).
    pub fn unfused_allgather(&self) -> (super::allgather::NvlinkCopy, u32) {
        (self.unfused.ag.copy(), self.unfused.ag.intra_ctas())
    }

    /// The GEMM alone, over whatever the gathered buffer holds (the "GEMM alone" figure).
    pub fn launch_gemm_only(&self, gpu: &Gpu) -> Result<()> {
        self.unfused.gemm.launch(gpu)
    }

    /// Wait for this rank's launches; report a device-side timeout or a proxy error. After a
    /// timeout, build the op again: an abandoned launch leaves its tile and tail counters (zero
    /// between launches otherwise) as they were. Where the unfused path's all-gather runs on the
    /// copy engines, or the fused path's gather does ([`AgGemmOptions::engines`]), a peer that
    /// never enters stops this process's CUDA context (see
    /// [`super::allgather::AllGather::launch`]): end the process then.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        self.diag.wait(gpu, "ag-gemm", || {
            self.unfused.gemm.check_diag()?;
            self.unfused.ag.check()?;
            self.comm.check()
        })
    }

    /// Launch and wait.
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.wait(gpu)
    }

    fn launch_fused(&self, gpu: &Gpu, p: &AgGemmParams) -> Result<()> {
        // Spread copies keep their address tables past the engine's shared memory.
        let smem = if p.spread != 0 { SIDE_SMEM_BYTES } else { SMEM_BYTES };
        let cfg = LaunchConfig::linear(p.gemm.roles.total(), THREADS, smem);
        let Some(e) = &self.engines else {
            // SAFETY: every address in `p` belongs to buffers this op owns or borrows for 'a
            // (peers' heaps stay mapped while the communicator lives); the caller synchronises
            // before dropping them (run / wait).
            unsafe { gpu.launch(self.kernel, &cfg, p)? };
            return Ok(());
        };
        use std::sync::atomic::Ordering::Relaxed;
        if e.broken.load(Relaxed) {
            return Err(invalid("launch", "an earlier launch was enqueued only in part: build the op again"));
        }
        // An earlier report leaves the abort word set: the enter step would give up at once and
        // stop the context. Refuse before enqueueing anything.
        self.diag.check()?;
        // The side streams follow everything queued before this call. Their work is queued
        // before the fused launch, which waits for its flags (serialised launches, as under
        // CUDA_LAUNCH_BLOCKING or a profiler, then still finish), and the caller's stream waits
        // for both after it.
        e.side.wait_for(gpu)?;
        let mut started = false;
        let enqueued = self.enqueue_engine_copies(e, p, &mut started).and_then(|()| {
            // SAFETY: as above.
            unsafe { gpu.launch(self.kernel, &cfg, p)? };
            Ok(())
        });
        // Joined even after a failure: copies already queued read the shard and write into the
        // peers, and the caller must not change or free either before they are done.
        let joined = gpu.wait_for(&e.local).and_then(|()| gpu.wait_for(&e.side));
        if enqueued.is_err() && started {
            // The side steps' launch count moved without the fused kernel's (or not in step).
            e.broken.store(true, Relaxed);
        }
        enqueued?;
        Ok(joined?)
    }

    /// The copy engines' part of a fused launch ([`AgGemmOptions::engines`]): on the side stream
    /// the enter step, then the shard into each local peer, each rank starting at the next,
    /// piece by piece with the piece's flags raised behind it; out of place, on a second stream
    /// after the enter step, the copy into this rank's own gathered A and its flags (with several
    /// nodes the proxy sends from that copy; on one node only the caller reads it).
    /// `started`: set once the enter step is queued (its launch counter moved).
    fn enqueue_engine_copies(&self, e: &Engines, p: &AgGemmParams, started: &mut bool) -> Result<()> {
        let step = |on: &Gpu, step: u32, peer: u32, (first, end): (u32, u32)| -> Result<()> {
            let sp =
                AgEngineParams { ag: *p, launches: e.words.addr(), epoch: e.words.addr() + 8, step, peer, first, end };
            // SAFETY: one CTA; every address in `sp` is the fused launch's (see launch_fused) or
            // this op's `words`.
            unsafe { on.launch(kernels::AG_GEMM_ENGINE, &LaunchConfig::linear(1, ENGINE_THREADS, 0), &sp)? };
            Ok(())
        };
        let bytes = |(first, end): (u32, u32)| (p.chunk_bytes_range(first).0, p.chunk_bytes_range(end - 1).1);
        step(&e.side, AG_ENGINE_ENTER, p.local_rank, (0, 0))?;
        *started = true;
        // The local copy follows the enter step (its epoch word) and runs beside the peers'. A
        // copy within one GPU runs on SMs, and the fused launch leaves it one: there only the
        // rows no compute tile writes (`tiles_copy_local`) go this way, and their flags (the
        // tiles that read them from the gathered A wait for those; the others read the shard
        // itself); a comm-only launch copies the whole shard.
        e.local.wait_for(&e.side)?;
        if p.in_place == 0 {
            let own = p.gathered + p.shard_offset(p.rank);
            for (lo, hi) in local_copy_runs(p) {
                // SAFETY: bytes `lo..hi` of the caller's shard and of this rank's slot of its
                // gathered A, alive as the fused launch's buffers.
                unsafe { e.local.copy_async(own + lo, p.shard_src + lo, (hi - lo) as usize)? };
            }
            step(&e.local, AG_ENGINE_FLAGS, p.local_rank, (0, p.chunks))?;
        }
        for k in 1..p.local_world {
            let lr = next_peer(p.local_rank, p.local_world, k);
            let to = p.peer_gathered[lr as usize] + p.shard_offset(p.rank);
            for &piece in &e.pieces {
                let (lo, hi) = bytes(piece);
                // SAFETY: the piece of this rank's shard and of its slot in local rank `lr`'s
                // mapped gathered A, which the enter step (queued before) saw ready.
                unsafe { e.side.copy_async(to + lo, p.shard_src + lo, (hi - lo) as usize)? };
                step(&e.side, AG_ENGINE_FLAGS, lr, piece)?;
            }
        }
        Ok(())
    }

    /// Unfused path, input in a buffer: copy the shard into its slot of the gathered buffer.
    fn stage_input(&self, gpu: &Gpu) -> Result<()> {
        if let AgInput::Buffer(a) = self.input {
            let bytes = self.shard().len() * 2;
            // SAFETY: both ranges are `bytes` long: the caller's shard (checked at construction)
            // and this rank's slot of the gathered buffer.
            unsafe { gpu.copy_async(self.shard().addr(), a.addr(), bytes)? };
        }
        Ok(())
    }
}

/// The bytes of this rank's shard a copy makes into its own gathered A (every chunk's
/// `AgGemmParams::local_copy_parts`: with `tiles_copy_local` the rows outside whole local tile
/// rows, else all of it), as runs of contiguous bytes: one copy each instead of one per chunk.
fn local_copy_runs(p: &AgGemmParams) -> Vec<(u64, u64)> {
    let mut runs: Vec<(u64, u64)> = Vec::new();
    for c in 0..p.chunks {
        for (lo, hi) in p.local_copy_parts(c, TILE_M) {
            match runs.last_mut() {
                _ if hi <= lo => {}
                Some(run) if run.1 == lo => run.1 = hi,
                _ => runs.push((lo, hi)),
            }
        }
    }
    runs
}

/// The tile walk (drawn from the counter?) and whether the push CTAs join it: the options, else
/// drawn and joined across nodes only (docs/PERF.md, "Dynamic tile claiming": on one node the
/// static walk was 0.6-2% faster, across two emulated nodes joining up to 3.6%). A wave to join
/// at without joining a static walk is a typed error.
fn walk(opts: &AgGemmOptions, world: &World) -> Result<(bool, bool)> {
    let dynamic = opts.dynamic.unwrap_or(world.nodes > 1);
    let join = opts.join.unwrap_or(dynamic);
    if opts.join_wave.is_some() && (dynamic || !join) {
        return Err(invalid("join_wave", "applies to a static walk that the push CTAs join (join on, dynamic off)"));
    }
    Ok((dynamic, join))
}

/// The arrival tail's (tile rows, ways) from the options, or None, where at most `max` rows may
/// be cut ([`arrival_tail_rows_max`]); typed errors name the option and the rule.
fn arrival_tail(
    opts: &AgGemmOptions,
    dynamic: bool,
    shape: GemmShape,
    max: u32,
    (world, sms): (&World, u32),
) -> Result<Option<(u32, u32)>> {
    let rows = match opts.tail_rows {
        Some(rows) => rows,
        // Off where it cannot apply (unless asked for: the errors below say why).
        None if dynamic && opts.tail_split != Some(true) && arrival_tail_by_default(shape, world, sms) => {
            ARRIVAL_TAIL_ROWS.min(max)
        }
        None => 0,
    };
    if rows == 0 {
        if opts.tail_ways.is_some() {
            return Err(invalid(
                "tail_ways",
                "applies to an arrival tail: `tail_rows` of at least 1 (none by default here)",
            ));
        }
        return Ok(None);
    }
    let ways = opts.tail_ways.unwrap_or(ARRIVAL_TAIL_WAYS);
    if !(2..=TAIL_WAYS_MAX).contains(&ways) {
        return Err(invalid("tail_ways", format!("must be 2 to {TAIL_WAYS_MAX} (got {ways})")));
    }
    if !dynamic {
        return Err(invalid("tail_rows", "needs the drawn walk (`dynamic`): a static walk's waves are fixed"));
    }
    if opts.tail_split == Some(true) {
        return Err(invalid("tail_rows", "not with `tail_split` (one tail per walk)"));
    }
    if rows > max {
        return Err(invalid(
            "tail_rows",
            format!(
                "at most {max} here: the walk's last tile rows that hold none of this rank's own rows (got {rows})"
            ),
        ));
    }
    // Positions past the whole tiles: two per range (`sched::StreamK`); the cut's k-block
    // arithmetic (`tiles x k_blocks` plus up to a range, and a range past it) in `u32`.
    let tiles = rows as u64 * shape.n.div_ceil(TILE_N as usize) as u64;
    let k_blocks = shape.k.div_ceil(TILE_K as usize) as u64;
    let ranges = tiles * ways as u64;
    if ranges * 2 + self::tiles(shape) as u64 > u32::MAX as u64 || tiles * (k_blocks + ways as u64) > u32::MAX as u64 {
        return Err(invalid("tail_rows", "too many tail tiles for 32-bit schedule positions at this shape"));
    }
    Ok(Some((rows, ways)))
}

/// The compute CTAs' wave by which the push CTAs should be done copying, at the rule of thumb's
/// rates (`tuned::ag_gemm_push_seconds` against a wave of the GEMM alone on `sms` SMs): where a
/// static walk they join hands them a share ([`AgGemmOptions::join_wave`]).
pub fn static_join_wave(shape: GemmShape, world: &World, split: Split, sms: u32, in_place: bool) -> u32 {
    let local_copy = !in_place && !tiles_copy_local(world, in_place);
    let push_s = tuned::ag_gemm_push_seconds(shape, world, local_copy, split.push);
    let wave_s = shape.flops() / tuned::AG_GEMM_RATE / tiles(shape).div_ceil(sms.max(1)) as f64;
    (push_s / wave_s).ceil() as u32
}

/// Output tiles of the fused kernel (`TILE_M x TILE_N`).
fn tiles(shape: GemmShape) -> u32 {
    (shape.m.div_ceil(TILE_M as usize) * shape.n.div_ceil(TILE_N as usize)) as u32
}

/// Whether the compute tiles write the local shard into the gathered A themselves (see
/// `AgGemmParams::tiles_copy_local`): on one node when the shard is not already in place.
fn tiles_copy_local(world: &World, in_place: bool) -> bool {
    world.nodes == 1 && !in_place
}

/// The options resolved for `shape` on this machine: explicit values win, then the tuned table
/// (entries for several nodes only over the `transport` they were measured over), then the rule
/// of thumb ([`tuned`]). Errors name the option and the rule.
pub fn resolve(
    opts: &AgGemmOptions,
    shape: GemmShape,
    world: &World,
    sms: u32,
    in_place: bool,
    transport: Option<&str>,
) -> Result<Split> {
    let shard_rows = (shape.m / world.world_size.max(1) as usize) as u32;
    let table = tuned::ag_gemm(shape, world, transport);
    let several_nodes = world.nodes > 1;
    let chunk_rows = opts.chunk_rows.or(table.map(|e| e.chunk_rows)).unwrap_or(TILE_M).min(shard_rows.max(1));
    let fwd = if several_nodes && world.local_world_size > 1 { opts.fwd_ctas.unwrap_or(2) } else { 0 };
    let inter_send = several_nodes as u32;
    if opts.push_ctas == Some(0) {
        return Err(invalid("push_ctas", "must be at least 1"));
    }
    let engines = opts.engines.unwrap_or(false);
    if engines {
        let rule = "not with `engines`: the copy engines copy the shard (no push CTAs)";
        if opts.spread == Some(true) {
            return Err(invalid("spread", rule));
        }
        if opts.push_ctas.is_some() {
            return Err(invalid("push_ctas", rule));
        }
        if opts.fan {
            return Err(invalid("fan", rule));
        }
        if several_nodes && !in_place {
            return Err(invalid(
                "engines",
                "with several nodes only in place: the proxy sends from this rank's own copy of the shard, which a \
                 copy within one GPU makes on SMs, and the fused launch leaves it one (1.13-1.66x slower on 4x H200)",
            ));
        }
    }
    let spread = !engines && opts.spread.unwrap_or(!several_nodes && world.local_world_size >= 4);
    if spread && opts.spread_push_every.is_some_and(|k| k < 2) {
        return Err(invalid("spread_push_every", "must be at least 2 (1 would leave the compute CTAs nothing)"));
    }
    if spread && opts.spread_every == Some(0) {
        return Err(invalid("spread_every", "must be at least 1"));
    }
    if chunk_rows == 0 {
        return Err(invalid("chunk_rows", "must be at least 1"));
    }
    if opts.fwd_ctas == Some(0) && several_nodes && world.local_world_size > 1 {
        return Err(invalid("fwd_ctas", "must be at least 1 with several nodes of several ranks"));
    }
    let tiles = tiles(shape);
    // Saturating: a role count near u32::MAX must fail the SM rule below, not wrap past it.
    let others = fwd.saturating_add(inter_send);
    let push = match opts.push_ctas.or(table.map(|e| e.push_ctas)) {
        _ if engines => 0,
        _ if spread => opts.push_ctas.unwrap_or(SPREAD_PUSH_CTAS),
        Some(p) => p,
        None => {
            // The CTAs the data needs, then every SM the compute CTAs cannot use anyway: the
            // tiles take as many waves with `compute` CTAs as with `sms - needed`.
            let needed = tuned::ag_gemm_push_ctas(shape, world, !in_place && !tiles_copy_local(world, in_place));
            let waves = tiles.div_ceil(sms.saturating_sub(needed.saturating_add(others)).max(1));
            let compute = tiles.div_ceil(waves.max(1));
            sms.saturating_sub(compute.saturating_add(others)).clamp(needed, needed.max(tuned::AG_GEMM_MAX_PUSH_CTAS))
        }
    };
    // With the copy engines one SM stays free for the side stream's one-CTA steps, which raise
    // the flags the tiles (here and at the peers) wait for: a grid on every SM would wait for
    // them forever.
    let comm = push.saturating_add(others).saturating_add(engines as u32);
    // Every CTA must be resident at once (compute waits on comm CTAs): one per SM at most.
    if comm >= sms {
        let arg = if fwd >= sms { "fwd_ctas" } else { "push_ctas" };
        return Err(invalid(
            arg,
            format!("{push} push + {others} forward / inter-send CTAs leave no compute CTA on {sms} SMs"),
        ));
    }
    Ok(Split { compute: (sms - comm).min(tiles), push, fwd, inter_send, chunk_rows, spread, engines })
}

impl super::TwoPathOp for AgGemm<'_> {
    fn launch_path(&self, gpu: &Gpu, path: Path) -> Result<()> {
        AgGemm::launch_path(self, gpu, path)
    }

    fn wait(&self, gpu: &Gpu) -> Result<()> {
        AgGemm::wait(self, gpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_are_drawn_and_joined_across_nodes_by_default() {
        let opts = AgGemmOptions::default();
        assert_eq!(walk(&opts, &World::test(0, 4, 1)).unwrap(), (false, false));
        assert_eq!(walk(&opts, &World::test(0, 4, 2)).unwrap(), (true, true));
        let no_join = AgGemmOptions { join: Some(false), ..Default::default() };
        assert_eq!(walk(&no_join, &World::test(0, 4, 2)).unwrap(), (true, false));
        let drawn = AgGemmOptions { dynamic: Some(true), ..Default::default() };
        assert_eq!(walk(&drawn, &World::test(0, 4, 1)).unwrap(), (true, true));
        // A static walk joined late, and the wave it is joined at only there.
        let static_join = AgGemmOptions { join: Some(true), join_wave: Some(9), ..Default::default() };
        assert_eq!(walk(&static_join, &World::test(0, 4, 1)).unwrap(), (false, true));
        for (dynamic, join, nodes) in [(None, None, 2), (None, Some(false), 1), (Some(true), Some(true), 1)] {
            let o = AgGemmOptions { dynamic, join, join_wave: Some(3), ..Default::default() };
            let e = walk(&o, &World::test(0, 4, nodes)).unwrap_err().to_string();
            assert!(e.starts_with("invalid argument `join_wave`"), "{e}");
        }
    }

    #[test]
    fn the_copy_engines_take_the_push_ctas_place() {
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 };
        let on = AgGemmOptions { engines: Some(true), ..Default::default() };
        let split = resolve(&on, shape, &World::test(0, 4, 1), 132, false, None).unwrap();
        // One SM left to the side stream's steps.
        assert_eq!((split.push, split.compute, split.spread, split.engines), (0, 131, false, true));
        // Several nodes: in place only; the forward and inter-send CTAs stay.
        let e = resolve(&on, shape, &World::test(0, 4, 2), 132, false, None).unwrap_err().to_string();
        assert!(e.starts_with("invalid argument `engines`"), "{e}");
        let split = resolve(&on, shape, &World::test(0, 4, 2), 132, true, None).unwrap();
        assert_eq!((split.push, split.fwd, split.inter_send, split.compute), (0, 2, 1, 128));
        for (bad, name) in [
            (AgGemmOptions { spread: Some(true), ..on.clone() }, "spread"),
            (AgGemmOptions { push_ctas: Some(4), ..on.clone() }, "push_ctas"),
            (AgGemmOptions { fan: true, ..on.clone() }, "fan"),
        ] {
            let e = resolve(&bad, shape, &World::test(0, 4, 1), 132, false, None).unwrap_err().to_string();
            assert!(e.starts_with(&format!("invalid argument `{name}`")), "{e}");
        }
    }

    #[test]
    fn with_the_copy_engines_the_nodes_shards_come_whole_in_their_order() {
        // 1 x 4, rank 1, shards of 2 tile rows in chunks of one: its own rows, then rank 0's
        // (copied at step 1), rank 3's (step 2), rank 2's (step 3).
        let w = World::test(1, 4, 1);
        assert_eq!(row_order(1024, 256, 128, &w, true), vec![2, 3, 0, 1, 6, 7, 4, 5]);
        // Push CTAs: chunk by chunk across the shards, nearest first.
        assert_eq!(row_order(1024, 256, 128, &w, false), vec![2, 3, 4, 6, 0, 5, 7, 1]);
        // 2 x 2, rank 3: its own, its node's other rank's (2), then the other node's by chunk.
        let w = World::test(3, 4, 2);
        assert_eq!(row_order(1024, 256, 128, &w, true), vec![6, 7, 4, 5, 0, 2, 1, 3]);
    }

    #[test]
    fn the_local_copy_runs_are_the_rows_no_tile_writes() {
        // Rank 1 of 2, 1000-row shard (rows 1000..2000) of 72-element rows in chunks of 128:
        // the tiles write tile rows 8..15 (rows 1024..1920), the copies the rest.
        let mut p = AgGemmParams { shard_rows: 1000, chunk_rows: 128, chunks: 8, rank: 1, ..Default::default() };
        p.gemm.k = 72;
        let row = 144;
        assert_eq!(local_copy_runs(&p), vec![(0, row * 1000)]);
        p.tiles_copy_local = 1;
        assert_eq!(local_copy_runs(&p), vec![(0, row * 24), (row * 920, row * 1000)]);
        // Rank 0: its rows 0..1000 start a tile row; only the tail past 896 is copied.
        p.rank = 0;
        assert_eq!(local_copy_runs(&p), vec![(row * 896, row * 1000)]);
        // A shard within one tile row: no whole tile row, all of it copied.
        let mut q = AgGemmParams { shard_rows: 100, chunk_rows: 32, chunks: 4, rank: 3, tiles_copy_local: 1, ..p };
        q.gemm.k = 72;
        assert_eq!(local_copy_runs(&q), vec![(0, row * 100)]);
    }

    #[test]
    fn engine_pieces_cover_every_chunk_once_in_order() {
        // 256 MiB in 41 chunks: four pieces; 2 MiB: one; 1 GiB in 3 chunks: one per chunk.
        assert_eq!(engine_pieces(41, 256 << 20), vec![(0, 10), (10, 20), (20, 30), (30, 41)]);
        assert_eq!(engine_pieces(21, 2 << 20), vec![(0, 21)]);
        assert_eq!(engine_pieces(3, 1 << 30), vec![(0, 1), (1, 2), (2, 3)]);
        for chunks in 1..70 {
            for mib in [1u64, 16, 65, 100, 1000] {
                let pieces = engine_pieces(chunks, mib << 20);
                assert!(pieces.len() as u32 <= ENGINE_PIECES_MAX);
                assert_eq!(pieces.first().map(|p| p.0), Some(0));
                assert_eq!(pieces.last().map(|p| p.1), Some(chunks));
                assert!(pieces.windows(2).all(|w| w[0].1 == w[1].0 && w[0].0 < w[0].1));
            }
        }
    }

    #[test]
    fn the_modelled_join_wave_is_when_the_copies_are_out() {
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 };
        let split = |push| Split {
            compute: 132 - push,
            push,
            fwd: 0,
            inter_send: 0,
            chunk_rows: 128,
            spread: false,
            engines: false,
        };
        // Three 64 MiB copies at 30 GB/s per CTA against 16 waves of 1.69 ms: 11 waves with 6
        // push CTAs, fewer with more.
        assert_eq!(static_join_wave(shape, &World::test(0, 4, 1), split(6), 132, true), 11);
        assert_eq!(static_join_wave(shape, &World::test(0, 4, 1), split(12), 132, true), 6);
        // One rank per node: nothing to copy, join at once.
        assert_eq!(static_join_wave(shape, &World::test(0, 2, 2), split(1), 132, true), 0);
    }

    #[test]
    fn the_tail_is_cut_when_it_fills_little_of_a_wave_and_reads_no_local_rows() {
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 }; // 2048 tiles of 128 k-blocks
        let plan = |world: &World, ctas: u32, wanted: Option<bool>| {
            let rows = shape.m as u32 / world.world_size;
            let order = row_order(shape.m as u32, rows, 256, world, false);
            Tail::plan(shape, &order, 8, ctas, wanted, |tm| tile_reads_rank(tm, shape.m as u32, rows, world.rank))
        };
        let summary = |t: &Tail| (t.dp, t.count(), t.slots);
        let w4 = World::test(1, 4, 1);
        // 126 CTAs: 16 waves and 32 tiles (a quarter wave) cut into 33-k-block ranges.
        let t = plan(&w4, 126, None);
        assert_eq!(summary(&t), (2016, 32, 5));
        assert_eq!(t.workspace_floats(), 2 * 32 * 5 * 64 * 256);
        // 131 CTAs: 83 tiles fill 63% of a wave, left whole unless asked for.
        assert_eq!(plan(&w4, 131, None).count(), 0);
        assert_eq!(summary(&plan(&w4, 131, Some(true))), (1965, 83, 3));
        assert_eq!(plan(&w4, 126, Some(false)).count(), 0);
        // 128 CTAs divide the tiles: nothing to cut.
        assert_eq!(summary(&plan(&w4, 128, Some(true))), (2048, 0, 1));
        // One rank: every row is local (its A is written out by the tiles that load it whole).
        assert_eq!(plan(&World::test(0, 1, 1), 126, Some(true)).count(), 0);
    }

    #[test]
    fn the_arrival_tail_cuts_the_last_rows_to_land_and_refuses_what_it_cannot_take() {
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 }; // 128 x 16 tiles of 128 k-blocks
        let w = World::test(0, 4, 2); // 2 x 2: rank 0's node holds ranks 0 and 1
        let rows = shape.m as u32 / 4;
        let order = row_order(shape.m as u32, rows, 64, &w, false);
        let tail = Tail::arrivals(shape, &order, 8, 4, 4);
        assert_eq!((tail.dp, tail.count(), tail.ranges, tail.rows), (2048 - 64, 64, 256, 4));
        // 32 k-blocks per range, so a tile's ranges fill four slots and a fifth stays spare.
        assert_eq!(tail.slots, 5);
        // The last two chunks of each of the other node's shards (ranks 2 and 3), columns fastest.
        let last: Vec<u32> = order[order.len() - 4..].to_vec();
        assert!(last.iter().all(|&tm| tm >= 2 * rows / TILE_M), "{last:?}");
        let expect: Vec<(u32, u32)> = last.iter().flat_map(|&tm| (0..16).map(move |tn| (tm, tn))).collect();
        assert_eq!(tail.tiles, expect);
        // Every tile row after this rank's own 32 is another rank's; a tail may take all 96.
        let max = arrival_tail_rows_max(&order, |tm| tile_reads_rank(tm, shape.m as u32, rows, 0));
        assert_eq!(max, 96);

        let opts = |tail_rows, tail_ways| AgGemmOptions { tail_rows, tail_ways, ..Default::default() };
        let check = |o: &AgGemmOptions, dynamic| arrival_tail(o, dynamic, shape, max, (&w, 132));
        // 2 x 2 at this shape: the link (1.34 ms) is shorter than the GEMM (1.69 ms at the
        // rule's rate), so no tail unless asked for.
        assert_eq!(check(&opts(None, None), true).unwrap(), None);
        assert_eq!(check(&opts(Some(0), None), true).unwrap(), None);
        assert_eq!(check(&opts(Some(4), None), true).unwrap(), Some((4, ARRIVAL_TAIL_WAYS)));
        assert_eq!(check(&opts(Some(96), Some(8)), true).unwrap(), Some((96, 8)));
        let err = |o: &AgGemmOptions, dynamic| check(o, dynamic).unwrap_err().to_string();
        assert!(err(&opts(Some(97), None), true).contains("tail_rows"));
        assert!(err(&opts(Some(4), Some(1)), true).contains("tail_ways"));
        assert!(err(&opts(Some(4), Some(9)), true).contains("tail_ways"));
        assert!(err(&opts(Some(0), Some(4)), true).contains("tail_ways"));
        assert!(err(&opts(None, Some(4)), true).contains("tail_ways"));
        assert!(err(&opts(Some(4), None), false).contains("dynamic"));
        let both = AgGemmOptions { tail_split: Some(true), ..opts(Some(4), None) };
        assert!(err(&both, true).contains("tail_split"));
    }

    #[test]
    fn the_arrival_tail_is_on_by_default_where_the_link_bounds_the_launch() {
        let on = |m: usize, n: usize, world: &World| arrival_tail_by_default(GemmShape { m, n, k: 8192 }, world, 132);
        let (two_by_one, two_by_two) = (World::test(1, 2, 2), World::test(1, 4, 2));
        // 2 x 1: a 128 MiB shard takes 2.68 ms on the link, the GEMM 1.69 at the rule's rate.
        assert!(on(16384, 4096, &two_by_one) && on(32768, 4096, &two_by_one));
        // As long as the link or longer: off (level or slower at five of the six points measured,
        // 2% faster at 8192^3 across one-rank nodes).
        assert!(!on(16384, 8192, &two_by_one) && !on(8192, 8192, &two_by_one));
        assert!(!on(16384, 4096, &two_by_two) && !on(8192, 8192, &two_by_two));
        // One node: nothing crosses a link.
        assert!(!on(16384, 1024, &World::test(0, 2, 1)));
        // Fewer than 8 waves of tiles: off however long the link (2048 x 4096: 128 tiles).
        assert!(!arrival_tail_by_default(GemmShape { m: 2048, n: 4096, k: 8192 }, &two_by_one, 132));
        assert!(arrival_tail_by_default(GemmShape { m: 16384, n: 4096, k: 8192 }, &two_by_one, 256));
        assert!(!arrival_tail_by_default(GemmShape { m: 16384, n: 4096, k: 8192 }, &two_by_one, 257));
        // The default at 2 x 1: two rows cut two ways, on the drawn walk only.
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 };
        let order = row_order(16384, 8192, 128, &two_by_one, false);
        let max = arrival_tail_rows_max(&order, |tm| tile_reads_rank(tm, 16384, 8192, 1));
        let d = AgGemmOptions::default();
        let at = |o: &AgGemmOptions, dynamic| arrival_tail(o, dynamic, shape, max, (&two_by_one, 132)).unwrap();
        assert_eq!(at(&d, true), Some((2, 2)));
        assert_eq!(at(&d, false), None);
        let split = AgGemmOptions { tail_split: Some(true), ..Default::default() };
        assert_eq!(at(&split, true), None);
    }

    #[test]
    fn row_order_is_a_permutation_local_first_then_node_then_other_nodes() {
        for (m, w, nodes, chunk) in
            [(2000u32, 2u32, 1u32, 128u32), (4000, 4, 2, 48), (16384, 4, 1, 128), (1024, 4, 4, 1000)]
        {
            let shard = m / w;
            for rank in 0..w {
                let wd = World::test(rank, w, nodes);
                let order = row_order(m, shard, chunk, &wd, false);
                let mut sorted = order.clone();
                sorted.sort();
                assert_eq!(sorted, (0..m.div_ceil(TILE_M)).collect::<Vec<_>>(), "not a permutation");
                // Class of a tile row: the worst source among its rows.
                let class = |t: u32| {
                    let (first, end) = (t * TILE_M, ((t + 1) * TILE_M).min(m));
                    (first..end)
                        .map(|r| {
                            let s = r / shard;
                            if s == rank {
                                0
                            } else if wd.is_local(s) {
                                1
                            } else {
                                2
                            }
                        })
                        .max()
                        .unwrap()
                };
                let classes: Vec<u32> = order.iter().map(|&t| class(t)).collect();
                assert!(classes.windows(2).all(|p| p[0] <= p[1]), "rank {rank}: classes out of order {classes:?}");
            }
        }
    }

    #[test]
    fn split_rules_are_named() {
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 };
        let w = World::test(0, 2, 1);
        let def = AgGemmOptions::default();
        let s = resolve(&def, shape, &w, 132, true, None).unwrap();
        assert_eq!((s.push, s.fwd, s.inter_send, s.chunk_rows), (4, 0, 0, 128));
        assert_eq!(s.compute, 128, "2048 tiles: 16 waves of 128");
        // Not in place on one node the compute tiles make the local copy: the same split.
        let s = resolve(&def, shape, &w, 132, false, None).unwrap();
        assert_eq!((s.compute, s.push), (128, 4));
        // Several nodes: the push CTAs copy locally first (the proxy sends from that copy); the
        // tiles then take 17 waves, which 121 compute CTAs finish as fast as 125, so the other
        // SMs push.
        let s = resolve(&def, shape, &World::test(0, 2, 2), 132, false, None).unwrap();
        assert_eq!((s.compute, s.push + s.inter_send), (121, 11));
        let e = resolve(&AgGemmOptions { push_ctas: Some(132), ..Default::default() }, shape, &w, 132, true, None)
            .unwrap_err();
        assert!(e.to_string().contains("push_ctas"), "{e}");
        let e = resolve(&AgGemmOptions { push_ctas: Some(0), ..Default::default() }, shape, &w, 132, true, None)
            .unwrap_err();
        assert!(e.to_string().starts_with("invalid argument `push_ctas`"), "{e}");
        let two_nodes = resolve(&def, shape, &World::test(1, 4, 2), 132, true, None).unwrap();
        assert_eq!((two_nodes.fwd, two_nodes.inter_send), (2, 1));
        let tiny = resolve(&def, GemmShape { m: 2000, n: 8, k: 72 }, &w, 132, true, None).unwrap();
        assert_eq!(tiny.compute, 16, "no more compute CTAs than tiles");
        // The tuned entries of 2 x 1 emulated nodes apply over that transport only.
        let cube = GemmShape { m: 8192, n: 8192, k: 8192 };
        let emulated = resolve(&def, cube, &World::test(0, 2, 2), 132, false, Some("emulated-nic")).unwrap();
        assert_eq!(emulated.chunk_rows, 32);
        let other = resolve(&def, cube, &World::test(0, 2, 2), 132, false, Some("verbs")).unwrap();
        assert_eq!(other.chunk_rows, 128);
    }
}
