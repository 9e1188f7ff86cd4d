//! GEMM + ReduceScatter and GEMM + AllReduce, tensor parallelism's second projection: rank r
//! holds `A_r[M, K/W]` and `B_r` (`[K/W, N]` or `[N, K/W]`); the sum over ranks of `A_r @ B_r`
//! is scattered by row blocks (rank r gets rows `r * M/W ..`) or, all-reduce, given whole to
//! every rank.
//!
//! The fused path is ONE persistent launch (`device/src/kernels/gemm_rs.rs`): each rank computes
//! the tiles of the other ranks' row blocks first and hands each, rounded to bf16, to its owner as
//! soon as its epilogue has it (two ranks: the owner pulls it from this rank's outbox over
//! NVLink, right after sending it the same tile of the puller's block, [`GemmRsOptions::prefetch`];
//! more ranks: it is pushed into the owner's inbox, [`GemmRsOptions::push`]); the owner computes
//! its own block last and adds what arrived. A small all-reduce goes one shot instead
//! ([`GemmRsOptions::one_shot`]): every rank pushes its partial of every tile to every other
//! rank and sums every tile itself, so no tile waits for a second hop. Helper threads in the
//! producer warpgroup do all the waiting and copying, so the tensor cores never wait on
//! NVLink. The unfused path (our GEMM into a partial buffer, then a pull-and-sum kernel) is the
//! reference: the same sums in the same order, the same bits.
//!
//! **Several nodes** (`device/src/kernels/gemm_rs_nodes.rs`, still one launch): inside each node
//! the same NVLink protocol gathers each block's partials at its *collector* there (the rank with
//! the owner's local index), which rounds their sum, the node partial, to bf16; inter-send CTAs
//! push node partials through the FIFO and proxy, a group of [`GemmRsOptions::group`] tiles per
//! WRITE, to the ranks of the other nodes that need them (reduce-scatter: the owner; all-reduce:
//! every node's collector of the block), and inter-reduce CTAs add what arrived from every node
//! and store the result (all-reduce: into every local rank's output over NVLink). A block
//! crosses the inter-node link once per destination node. The unfused path is our GEMM, then
//! `mk_reduce_nodes` (the same sums in the same order, through the same FIFO).
//!
//! **Precision contract.** Products accumulate in fp32 on the tensor cores; each rank's partial
//! is rounded to bf16 once; the partials are added in fp32 (the summing rank's first, then the
//! others in rank order) and the sum rounded once to the output type. With several nodes the sum
//! over a node's ranks is a node partial, rounded to bf16 once (the inter-node hop), and the node
//! partials are added in fp32 in node order before the rounding to the output type. Per element,
//! with `P_s` the exact partials, `N_m` node m's exact partial sums, `u = 2^-8` (bf16's unit
//! roundoff: one rounding moves a value by at most u of its size) and `E_s` the accumulation
//! bound of partial s (`gemm::reference_row_bounded`: each wgmma step of 16 products held to 17
//! truncations of 2^-23 of the step's largest magnitude, the running sum included):
//! `|out - sum_s P_s| <= sum_s E_s + u * (sum_s |P_s| + [nodes > 1] sum_m |N_m| + |out|) + (W +
//! nodes) * 2^-24 * sum_s |P_s|` (fp32 adds; `sum_m |N_m| <= sum_s |P_s|`), and for f32 output
//! the `|out|` term drops. `E_s` follows the products' size, not the partial's: where large
//! partials cancel it is the largest term. The tests hold every rank's
//! result to this bound against an f64 host reference on sampled rows.
use super::copy_engines::{CopyStep, CopyStream, Span};
use super::gemm::{BLayout, CAddr, Gemm, GemmOptions, GemmShape};
use super::{form_switch, tuned, Path, PathChoice};
use crate::abi::{
    GemmRsParams, PeerTable, ReduceNodesParams, ReduceParams, RoleSplit, FLAG_STRIDE, HALF_TILE_BYTES, MAX_LOCAL_RANKS,
};
use crate::comm::communicator::{Communicator, HeapRegion, HEAP_ALIGN};
use crate::comm::world::World;
use crate::error::{invalid, DiagBuffers, Result};
use crate::gpu::{kernels, DeviceBuffer, DeviceSlice, Gpu, LaunchConfig, TensorMap};
use half::bf16;
use mkernel_device::kernels_info::gemm::{SMEM_BYTES, THREADS, TILE_M};
use std::cell::Cell;
use std::time::Duration;

/// Which collective follows the GEMM.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Collective {
    /// Rank r gets rows `r * M/W .. (r + 1) * M/W` of the sum.
    ReduceScatter,
    /// Every rank gets the whole sum.
    AllReduce,
}

impl Collective {
    /// `gemm_rs` / `gemm_ar`.
    pub fn op_name(self) -> &'static str {
        match self {
            Collective::ReduceScatter => "gemm_rs",
            Collective::AllReduce => "gemm_ar",
        }
    }
}

/// Options.
#[derive(Clone, Debug, PartialEq)]
pub struct GemmRsOptions {
    /// f32 output instead of bf16.
    pub out_f32: bool,
    /// Fused, unfused, or chosen per shape (the tuned table's faster path at the nearest shape
    /// measured on this world, else fused).
    pub path: PathChoice,
    /// Tile rows walked together within an owner block (L2 reuse).
    pub group_m: u32,
    /// Rounds of sends before the first collected tile. One node (`sched::OwnerTiles`): an own
    /// tile waits for the others' partials of it, sent `lead` rounds or more before it, and the
    /// sends spread over the launch once own tiles begin. Several nodes (`sched::NodeTiles`):
    /// the same in each half of the walk, the first half collecting the node partials that
    /// cross the inter-node link, which so start early. None: the tuned table's (one node),
    /// else [`default_lead`]. Two-phase form only (one shot walks one fixed order on every rank).
    pub lead: Option<u32>,
    /// All-reduce on one node: one shot (every rank pushes its partial of every tile to every
    /// other rank and sums every tile itself) instead of two phases (each block summed by its
    /// owner, then copied to the others). None: the tuned table's, else one shot up to
    /// [`ONE_SHOT_MAX_BYTES`] of partial (`M x N` bf16), two phases above.
    pub one_shot: Option<bool>,
    /// One node: sources push their partials into the owner's inbox over NVLink instead of
    /// owners pulling them from the sources' outboxes (pulling takes an outbox as large as the
    /// inbox: an `M x N` bf16 buffer, tile-padded, see [`GemmRs::heap_bytes`]). None:
    /// [`pushes`]' rule.
    pub push: Option<bool>,
    /// One node, two phases, owners pulling: each send tile's helper pulls the same tile of this
    /// rank's own block right after sending (its owner computes it in the same round), so the
    /// reads fall in the sends' part of the launch rather than in the own tiles' (where the
    /// all-reduce's second phase writes). None: [`prefetches`]' rule.
    pub prefetch: Option<bool>,
    /// Two-phase all-reduce on one node with bf16 output: each rank pulls the other ranks'
    /// reduced tiles over NVLink instead of their owners pushing them (NVLink reads slow the
    /// GEMM about half as much as writes: 1-2% faster at world 2 on large shapes, docs/PERF.md).
    /// None: [`pulls_reduced`]' rule.
    pub pull_reduced: Option<bool>,
    /// One node, two phases: the copy engines move the partials to their owners (and, for the
    /// all-reduce, the reduced blocks to the other ranks) instead of the helpers' bulk copies
    /// over NVLink (`GemmRsParams::engine_counts`). The helpers store into this rank's own
    /// memory and count each band (a `group_m` group of an owner block's tile rows); a stream
    /// forked from the caller's waits for each band's count and copies it to every peer with
    /// its flags. The fused launch is then the kernel plus that stream's work (joined back into
    /// the caller's stream). Sources push (`push` may not be off), nothing is prefetched or
    /// pulled reduced; every send goes first unless `lead` says otherwise (at least a band's
    /// tiles: [`engine_lead`]). The stream runs beside the kernel: under serialised launches
    /// (`CUDA_LAUNCH_BLOCKING`, a profiler's replay) its waits time out and report. None:
    /// [`engines`]' rule (on at two ranks for large partials, where measured).
    pub engines: Option<bool>,
    /// With the copy engines, the all-reduce's last bands of each rank's block that its helpers
    /// push into the other ranks' outputs themselves (`GemmRsParams::engine_tail`): at the
    /// launch's end a band's copy behind a stream wait is a tail no tile hides. None:
    /// [`DEFAULT_ENGINE_TAIL`]; at most the block's bands.
    pub engine_tail: Option<u32>,
    /// Nanoseconds between the first two tiles' sends of compute CTAs `i % 8` apart
    /// (`GemmRsParams::stagger_ns`; 0: none, at most [`MAX_STAGGER_NS`]). None: [`staggers`]'
    /// rule.
    pub stagger_ns: Option<u32>,
    /// Several nodes: CTAs pushing node partials into the FIFO (None: [`DEFAULT_INTER_SEND`]).
    pub inter_send: Option<u32>,
    /// Several nodes: CTAs adding the node partials (None: the tuned table's for this transport
    /// if it leaves compute CTAs, else [`default_inter_reduce`]).
    pub inter_reduce: Option<u32>,
    /// Several nodes: tiles per FIFO WRITE of a node partial (None: the tuned table's for this
    /// transport, else [`DEFAULT_GROUP`]; at most the tiles of a block).
    pub group: Option<u32>,
    /// Bound on every device-side wait.
    pub timeout: Duration,
    /// Take the knobs left unset and, with [`PathChoice::Auto`], the path from the tuned table
    /// (false: the rules of thumb alone, what `mkernel tune` compares against).
    pub tuned: bool,
}

impl Default for GemmRsOptions {
    fn default() -> Self {
        Self {
            out_f32: false,
            path: PathChoice::Auto,
            group_m: 8,
            lead: None,
            one_shot: None,
            push: None,
            prefetch: None,
            stagger_ns: None,
            pull_reduced: None,
            engines: None,
            engine_tail: None,
            inter_send: None,
            inter_reduce: None,
            group: None,
            timeout: Duration::from_secs(10),
            tuned: true,
        }
    }
}

/// The largest partial (`M x N` bf16 bytes) for which the all-reduce goes one shot by default
/// (see [`GemmRsOptions::one_shot`]). Measured on 2 x H200 (`mkernel bench gemm-ar --one-shot
/// on|off`, docs/PERF.md): one shot is 5-13% faster at 512 and 1024 x 4096 x 4096 (4 and 8 MiB),
/// 14-17% slower at 2048 x 4096 x 4096 and 30-40% slower above, where every tile's sum waits for
/// its wave's partials to cross NVLink together while the two phases overlap them with compute.
pub const ONE_SHOT_MAX_BYTES: usize = 8 << 20;

/// What a tuned entry for several nodes must fit: the transport it was measured over and the
/// SMs there are.
#[derive(Clone, Copy, Debug)]
pub struct Fit<'t> {
    /// The communicator's transport ([`Communicator::transport`]).
    pub transport: &'t str,
    /// SMs of this GPU.
    pub sms: u32,
}

/// `opts` with each knob left to its default taken from the tuned table (`mkernel tune
/// gemm-rs|gemm-ar`, [`tuned::gemm_rs`]) at the nearest shape measured on this world, if any
/// (and `opts.tuned`), with the path it measured faster. Knobs the table lacks keep their rules
/// of thumb; so do several-node knobs without `fit`, measured over another transport, or that
/// would leave no compute CTA; one shot takes no lead from the table.
pub fn with_tuned(
    opts: &GemmRsOptions,
    collective: Collective,
    shape: GemmShape,
    world: &World,
    fit: Option<Fit<'_>>,
) -> (GemmRsOptions, Option<Path>) {
    let mut o = opts.clone();
    if !opts.tuned {
        return (o, None);
    }
    let Some(e) = tuned::gemm_rs(collective, shape, world, fit.map(|f| f.transport)) else { return (o, None) };
    if world.nodes <= 1 {
        o.one_shot = o.one_shot.or(e.one_shot.filter(|_| collective == Collective::AllReduce));
        if o.one_shot != Some(true) {
            o.lead = o.lead.or(e.lead);
        }
    } else if let Some(f) = fit {
        let send = o.inter_send.unwrap_or(DEFAULT_INTER_SEND);
        o.inter_reduce = o.inter_reduce.or(e.inter_reduce.filter(|&ir| ir + send < f.sms));
        o.group = o.group.or(e.group);
    }
    (o, Some(e.path))
}

/// Whether the all-reduce runs one shot: the option, or by default up to
/// [`ONE_SHOT_MAX_BYTES`]. Errors name the option and the rule.
pub fn one_shot(opts: &GemmRsOptions, collective: Collective, shape: GemmShape, world: &World) -> Result<bool> {
    let possible = collective == Collective::AllReduce && world.nodes <= 1 && world.world_size > 1;
    let rule = "applies to the all-reduce of two or more ranks on one node";
    form_switch(("one_shot", opts.one_shot, rule), possible, shape.m * shape.n * 2 <= ONE_SHOT_MAX_BYTES)
}

/// The smallest partial (`M x N` bf16 bytes) whose reduce-scatter the copy engines move by
/// default at two ranks ([`engines`]). Measured on 2 x H200 (docs/PERF.md, "Across two GPUs",
/// two calls): level or up to 1.3% faster than owners pulling at 64-256 MiB, within 1.05 of the
/// GEMM alone at all four large shapes (the default twice over it); 20% slower at 16 MiB
/// (2048x4096x4096), where the band copies' waits and fixed costs are not hidden.
pub const ENGINES_MIN_BYTES_RS: usize = 64 << 20;

/// The smallest partial whose all-reduce the copy engines move by default at two ranks, with
/// [`ENGINES_MIN_BANDS_AR`]: 1-3% faster than pulling the reduced tiles at 16384x8192x8192,
/// 16384x4096x8192 and 32768x4096x8192 (128-256 MiB, 8-16 bands) with the pushed tail of one
/// band; 1.5% slower at 8192x8192x8192 and 25-30% at 8192x4096x4096 (4 bands each).
pub const ENGINES_MIN_BYTES_AR: usize = 128 << 20;

/// The fewest bands of an owner block (`group_m` groups of tile rows) at which the all-reduce's
/// engines pay by default ([`ENGINES_MIN_BYTES_AR`]): with four, the pushed last band is a
/// quarter of the second phase and each copied band a long wait.
pub const ENGINES_MIN_BANDS_AR: u32 = 8;

/// Whether the copy engines move what crosses NVLink ([`GemmRsOptions::engines`]): the option
/// where the form allows it (two phases on one node of two or more ranks; else a typed error),
/// else where measured to pay: two ranks, the partial of [`ENGINES_MIN_BYTES_RS`] or more
/// (reduce-scatter) or of [`ENGINES_MIN_BYTES_AR`] and [`ENGINES_MIN_BANDS_AR`] bands or more
/// (all-reduce), unless another option asks for a form of its own (`push` either way: the
/// helpers' pushes or the owners' pulls; prefetches; pulled reduced tiles) or `asked_lead` (the
/// caller's own, not the tuned table's) is shorter than a band ([`engine_lead`]).
pub fn engines(
    opts: &GemmRsOptions,
    asked_lead: Option<u32>,
    collective: Collective,
    shape: GemmShape,
    world: &World,
    one_shot: bool,
) -> Result<bool> {
    let possible = world.nodes <= 1 && world.world_size > 1 && !one_shot;
    let rule = "applies to the two-phase form on one node of two or more ranks";
    let rows = (shape.m / world.world_size.max(1) as usize) as u32;
    let (bands, band_tiles, _) = GemmRsParams::band_shape(rows, shape.n as u32, opts.group_m);
    let excluded = opts.push.is_some()
        || opts.prefetch == Some(true)
        || opts.pull_reduced == Some(true)
        || asked_lead.is_some_and(|l| l < band_tiles);
    let bytes = shape.m.saturating_mul(shape.n).saturating_mul(2);
    let measured = match collective {
        Collective::ReduceScatter => bytes >= ENGINES_MIN_BYTES_RS,
        Collective::AllReduce => bytes >= ENGINES_MIN_BYTES_AR && bands >= ENGINES_MIN_BANDS_AR,
    };
    form_switch(("engines", opts.engines, rule), possible, world.world_size == 2 && !excluded && measured)
}

/// Bands at the end of the all-reduce's second phase that the helpers push with the copy
/// engines on ([`GemmRsOptions::engine_tail`]).
pub const DEFAULT_ENGINE_TAIL: u32 = 1;

/// The all-reduce's pushed tail of bands with the copy engines ([`GemmRsOptions::engine_tail`]):
/// the option (the all-reduce with the engines only, at most `bands`), else
/// [`DEFAULT_ENGINE_TAIL`] (at most `bands`) there and 0 elsewhere. Errors name the option and
/// the rule.
pub fn engine_tail(opts: &GemmRsOptions, collective: Collective, engines: bool, bands: u32) -> Result<u32> {
    let possible = engines && collective == Collective::AllReduce;
    match opts.engine_tail {
        Some(_) if !possible => Err(invalid("engine_tail", "applies to the all-reduce with the copy engines")),
        Some(t) if t > bands => Err(invalid("engine_tail", format!("{t} bands: a block has {bands}"))),
        Some(t) => Ok(t),
        None if possible => Ok(DEFAULT_ENGINE_TAIL.min(bands)),
        None => Ok(0),
    }
}

/// The walk's lead with the copy engines ([`GemmRsOptions::engines`]): the asked one (at most
/// `per_owner`), else every send first. An own tile's partials arrive a whole band at a time,
/// and an own tile at round `lead + i` needs the sends of its band's tiles, up to round `i +
/// band_tiles - 1` of every peer's walk: a lead below `band_tiles` (a band's tiles, `group_m`
/// tile rows of an owner block) could make CTAs wait on each other in a cycle, so it is a typed
/// error.
pub fn engine_lead(asked: Option<u32>, band_tiles: u32, per_owner: u32) -> Result<u32> {
    let lead = asked.unwrap_or(u32::MAX).min(per_owner);
    if lead < band_tiles {
        return Err(invalid(
            "lead",
            format!(
                "{lead} rounds: with the copy engines at least a band's {band_tiles} tiles (an own tile waits for its whole band of partials)"
            ),
        ));
    }
    Ok(lead)
}

/// Whether the sources push their partials: the option, else (one node) above two ranks (4 x
/// H200, docs/PERF.md "Pushed partials": the reduce-scatter's pushing was 2.5-5% faster at world
/// 4 and 2-6% slower at world 2; at world 2 the all-reduce pulling with [`prefetches`] was 3-5%
/// faster than pushing, "Prefetched partials"). Several nodes and one shot fix it
/// (the reduce-scatter's collectors pull, the all-reduce's receive pushes, one shot pushes);
/// asking for the other is a typed error naming the option and the rule.
pub fn pushes(
    opts: &GemmRsOptions,
    collective: Collective,
    world: &World,
    (one_shot, engines): (bool, bool),
) -> Result<bool> {
    let rs = collective == Collective::ReduceScatter;
    let fixed = |fixed: bool, rule: &str| match opts.push {
        Some(v) if v != fixed => Err(invalid("push", rule)),
        _ => Ok(fixed),
    };
    if world.nodes > 1 {
        fixed(!rs, "is fixed across nodes: the reduce-scatter's collectors pull, the all-reduce's receive pushes")
    } else if one_shot {
        fixed(true, "is fixed for the one-shot all-reduce, which pushes (set one_shot to Some(false) to pull)")
    } else if engines {
        fixed(true, "is fixed with the copy engines, which push")
    } else {
        Ok(opts.push.unwrap_or(world.world_size > 2))
    }
}

/// Whether own tiles' partials are prefetched by the send tiles ([`GemmRsOptions::prefetch`]):
/// the option (one node, two phases, owners pulling: else a typed error), else where measured:
/// at two ranks (2 x H200, docs/PERF.md "Prefetched partials": the all-reduce 3-5% faster than
/// pulling at its own tiles, the reduce-scatter about 1%).
pub fn prefetches(opts: &GemmRsOptions, world: &World, (one_shot, push): (bool, bool)) -> Result<bool> {
    let possible = world.nodes <= 1 && !one_shot && !push;
    let rule = "applies on one node to the two-phase form with owners pulling (push off)";
    form_switch(("prefetch", opts.prefetch, rule), possible, world.world_size == 2)
}

/// The largest [`GemmRsOptions::stagger_ns`]: a CTA's first sends then wait at most 7 x 20 us.
pub const MAX_STAGGER_NS: u32 = 20_000;

/// The stagger where it was measured to pay: 2.5 us (4 x H200, docs/PERF.md "The reduce-scatter's
/// first waves, staggered": the first wave's sends left within 1 us of each other and took 25 us
/// each, the next tiles ran at 43 and 33 us against the GEMM alone's 22-23; staggered, the
/// reduce-scatter at 1 x 4 was 2.5-5.6% faster at the four large shapes, 7-10% slower at
/// 2048x4096x4096 (two waves of tiles); at world 2 level). The two-phase all-reduce at 1 x 4,
/// whose first waves are the same sends: about 1% faster at three of the four large shapes,
/// level at the fourth, and no better with 1.25 or 4 us (docs/PERF.md, "The stagger for the
/// all-reduce"); at two emulated nodes of two the reduce-scatter was 1% slower and the
/// all-reduce level.
pub const DEFAULT_STAGGER_NS: u32 = 2_500;

/// The fewest waves of tiles (tiles per compute CTA) of a launch that staggers by default: the
/// delays, up to 17.5 us, cost a short launch more than the burst they spread.
pub const STAGGER_MIN_WAVES: u32 = 8;

/// The first sends' stagger ([`GemmRsOptions::stagger_ns`]): the option (at most
/// [`MAX_STAGGER_NS`], else a typed error), else [`DEFAULT_STAGGER_NS`] for the pushed
/// two-phase forms (reduce-scatter and all-reduce) on one node above two ranks of at least
/// [`STAGGER_MIN_WAVES`] waves of tiles (`waves`), where measured, and none elsewhere.
pub fn staggers(opts: &GemmRsOptions, world: &World, push: bool, waves: u32) -> Result<u32> {
    match opts.stagger_ns {
        Some(ns) if ns > MAX_STAGGER_NS => {
            Err(invalid("stagger_ns", format!("{ns} ns: at most {MAX_STAGGER_NS} (a CTA's first sends wait 7 x that)")))
        }
        Some(ns) => Ok(ns),
        None => {
            let measured = world.nodes <= 1 && world.world_size > 2 && push && waves >= STAGGER_MIN_WAVES;
            Ok(if measured { DEFAULT_STAGGER_NS } else { 0 })
        }
    }
}

/// The smallest partial (`M x N` bf16 bytes) whose all-reduce pulls the reduced tiles by
/// default at two ranks ([`pulls_reduced`], with [`PULL_REDUCED_MIN_K`]). Measured on 2 x H200
/// at K/W = 4096 (docs/PERF.md, "Pulled reduced tiles", "Where pulling the reduced tiles
/// pays"): pulling was 4-8% slower at 16 MiB, level at 32, 2-5% faster at 48 and 64, 1-2% at
/// 128 and 256; at K/W = 8192 about 1% faster at 32 and 128 MiB.
pub const PULL_REDUCED_MIN_BYTES: usize = 32 << 20;

/// The smallest K per rank (`K / W`) at which the all-reduce pulls the reduced tiles by default
/// ([`pulls_reduced`]). At K/W = 2048 pulling was 7-11% slower at 64 and 128 MiB of partial (2 x
/// H200): each own tile's pull then waits on the other rank's sum of the same round, and a
/// shorter tile has less multiply to hide it under.
pub const PULL_REDUCED_MIN_K: usize = 4096;

/// Whether the all-reduce's ranks pull each other's reduced tiles
/// ([`GemmRsOptions::pull_reduced`]): the option where the form allows it (two phases on one
/// node, bf16 output; else a typed error), else where measured: two ranks, partials of
/// [`PULL_REDUCED_MIN_BYTES`] or more, K per rank of [`PULL_REDUCED_MIN_K`] or more.
pub fn pulls_reduced(
    opts: &GemmRsOptions,
    collective: Collective,
    shape: GemmShape,
    world: &World,
    (one_shot, engines): (bool, bool),
) -> Result<bool> {
    let possible = collective == Collective::AllReduce && world.nodes <= 1 && !one_shot && !opts.out_f32 && !engines;
    let rule = "applies to the two-phase all-reduce on one node with bf16 output, without the copy engines";
    let default = world.world_size == 2
        && shape.m.saturating_mul(shape.n).saturating_mul(2) >= PULL_REDUCED_MIN_BYTES
        && shape.k / world.world_size as usize >= PULL_REDUCED_MIN_K;
    form_switch(("pull_reduced", opts.pull_reduced, rule), possible, default)
}

/// The lead without a tuned one, for `ctas` walkers.
///
/// One node: every send first, except for the reduce-scatter over more than two ranks, two
/// waves (`2 ctas / world` rounds). Measured: on 2 x H200 spreading the sends gained nothing for
/// the reduce-scatter and cost the all-reduce 6%. On 4 x H200 with every send first the owners
/// pull three partials of every own tile in the last quarter of the launch, faster than NVLink
/// delivers them (16384x8192x8192: 1.20 ms against GEMM alone 0.74 ms); with 66 rounds (two waves
/// of 132) 0.95 ms, 33 rounds 0.97, 132 rounds 0.98, one round 1.61 (an own tile then waits for
/// partials its peers are still computing). The all-reduce did as well with every send first as
/// with any lead.
///
/// Several nodes: one wave of the walk's first half (rounds of `(nodes - 1) x local_world`
/// tiles), so a collected tile's partials were sent a wave before it, and the node partials
/// start crossing the link after about two waves rather than after the first quarter of the walk
/// (every send first).
pub fn default_lead(collective: Collective, world: &World, ctas: u32) -> u32 {
    if world.nodes > 1 {
        (ctas / ((world.nodes - 1) * world.local_world_size)).max(1)
    } else if collective == Collective::ReduceScatter && world.world_size > 2 {
        (2 * ctas / world.world_size).max(1)
    } else {
        u32::MAX
    }
}

/// A lead orders the two-phase form's sends; one shot walks one fixed order, so a lead asked
/// for there is a typed error rather than silently ignored.
pub fn form_takes_lead(one_shot: bool, asked_lead: Option<u32>) -> Result<()> {
    if one_shot && asked_lead.is_some() {
        return Err(invalid(
            "lead",
            "applies to the two-phase form; this all-reduce runs one shot (set one_shot to Some(false))",
        ));
    }
    Ok(())
}

/// Default inter-send CTAs with several nodes: one thread pushes a WRITE per group, far below
/// what one CTA can issue.
pub const DEFAULT_INTER_SEND: u32 = 1;
/// Default tiles per FIFO WRITE with several nodes: 8 tiles (512 KiB, ~10 us on a 400 Gb/s NIC)
/// amortise a command's cost (a proxy's copy or work request) while the first bytes still leave
/// early in the launch.
pub const DEFAULT_GROUP: u32 = 8;

/// Default inter-reduce CTAs with several nodes: each adds a half tile from every node and
/// stores it (all-reduce: to every local rank). Measured on 2 emulated nodes x 1 H200
/// (docs/PERF.md, "Several nodes, tuned"; fused / max(GEMM alone, modelled inter-node time) at
/// 16384 x 8192 x 8192): the reduce-scatter went from 2.27 with 4 CTAs to 1.32 with 8 and 1.03
/// with 12-32; the all-reduce, whose `nodes` blocks all come in, from 1.87 with 8 to 1.35, 1.19
/// and 1.10 with 16, 32 and 64. Each CTA taken is an SM the GEMM loses, so the all-reduce stops
/// at 32, where the GEMM of a node of 8 GPUs (an eighth of the inter-node bytes per rank) still
/// has 99 SMs.
pub fn default_inter_reduce(collective: Collective) -> u32 {
    match collective {
        Collective::ReduceScatter => 16,
        Collective::AllReduce => 32,
    }
}

/// The fused launch's CTAs for `tiles` output tiles on `sms` SMs, with several nodes or not:
/// compute CTAs, plus one node's inter-send and inter-reduce CTAs. Errors name the option and
/// the rule.
pub fn role_split(opts: &GemmRsOptions, collective: Collective, nodes: u32, tiles: u32, sms: u32) -> Result<RoleSplit> {
    if nodes == 1 {
        for (name, v) in [("inter_send", opts.inter_send), ("inter_reduce", opts.inter_reduce), ("group", opts.group)] {
            if v.is_some() {
                return Err(invalid(name, "applies to several nodes only (one node has no inter-node roles)"));
            }
        }
        return Ok(RoleSplit::compute_only(sms.min(tiles)));
    }
    let inter_send = opts.inter_send.unwrap_or(DEFAULT_INTER_SEND);
    let inter_reduce = opts.inter_reduce.unwrap_or(default_inter_reduce(collective));
    for (name, v) in [("inter_send", inter_send), ("inter_reduce", inter_reduce), ("group", opts.group.unwrap_or(1))] {
        if v == 0 {
            return Err(invalid(name, "must be at least 1 with several nodes"));
        }
    }
    // Every CTA must be resident at once (the roles wait for each other): one per SM at most.
    // Saturating: a count near u32::MAX must fail this rule, not wrap past it.
    let comm = inter_send.saturating_add(inter_reduce);
    if comm >= sms {
        return Err(invalid(
            "inter_reduce",
            format!("{inter_send} inter-send + {inter_reduce} inter-reduce CTAs leave no compute CTA on {sms} SMs"),
        ));
    }
    Ok(RoleSplit { compute: (sms - comm).min(tiles), intra_comm: 0, inter_send, inter_reduce })
}

/// The unfused path's reduce kernel, per call parity (one per op, built once: the variants'
/// sizes do not matter).
#[allow(clippy::large_enum_variant)]
enum Reduce {
    /// One node: pull every rank's partial and sum (`mk_reduce_pull`).
    Pull([ReduceParams; 2]),
    /// Several nodes: node partials, FIFO WRITEs, the sum over nodes (`mk_reduce_nodes`).
    Nodes([ReduceNodesParams; 2]),
}

/// The unfused path: per call parity, a plain GEMM into that parity's partial buffer, and the
/// reduce kernel reading every rank's buffer of the same parity (two buffers, so a rank that
/// runs ahead never overwrites a partial another rank still reads; with several nodes, also two
/// sets of node partials, so one is never rewritten while the last call's WRITE of it may still
/// be in flight).
struct Unfused<'a> {
    gemms: [Gemm<'a>; 2],
    reduce: Reduce,
    _partials: [HeapRegion<'a>; 2],
    _nodebufs: Vec<HeapRegion<'a>>,
    _flags: HeapRegion<'a>,
    _launches: DeviceBuffer<u64>,
    _counters: DeviceBuffer<u32>,
    diag: DiagBuffers,
    calls: Cell<u64>,
}

/// Bytes each rank sends over the inter-node link per fused launch of `collective` at `shape` on
/// `world` (0 on one node): every node partial it collects, for each node that needs it, in
/// whole half tiles.
pub fn inter_node_bytes(collective: Collective, shape: GemmShape, world: &World) -> u64 {
    if world.nodes <= 1 {
        return 0;
    }
    let all_reduce = collective == Collective::AllReduce;
    let map = crate::sched::NodeMap::new(world.rank, world.local_world_size, world.nodes);
    let blocks: u32 = (0..map.sent_blocks(all_reduce)).map(|k| map.dests(map.collected_node(k), all_reduce)).sum();
    let per_owner = GemmRsParams::per_owner((shape.m / world.world_size as usize) as u32, shape.n as u32);
    blocks as u64 * 2 * per_owner as u64 * HALF_TILE_BYTES as u64
}

/// The symmetric-heap allocations of an op, in bytes: one place for [`GemmRs::new`] and
/// [`GemmRs::heap_bytes`].
struct Sizes {
    out: usize,
    staging: usize,
    flags: usize,
    partial: usize,
    nodebuf: usize,
    unfused_flags: usize,
    nodes: u32,
}

impl Sizes {
    fn of(
        collective: Collective,
        shape: GemmShape,
        world: &World,
        out_f32: bool,
        (one_shot, push, engines): (bool, bool, bool),
    ) -> Sizes {
        let w = world.world_size.max(1);
        let nodes = world.nodes.max(1);
        let rows = shape.m / w as usize;
        let all_reduce = collective == Collective::AllReduce;
        let per_owner = GemmRsParams::per_owner(rows as u32, shape.n as u32);
        let inbox_tiles = GemmRsParams::inbox_tiles_of(w, per_owner, one_shot);
        // Owners pulling read the sources' outboxes; the copy engines copy from them.
        let outbox = !push || engines;
        let nodebox = if nodes > 1 { GemmRsParams::nodebox_bytes(nodes, per_owner) } else { 0 };
        let es = if out_f32 { 4 } else { 2 };
        Sizes {
            out: if all_reduce { shape.m } else { rows } * shape.n * es,
            staging: (GemmRsParams::staging_bytes(w, inbox_tiles, outbox) + nodebox) as usize,
            flags: 4 * GemmRsParams::flag_words(w, nodes, per_owner, inbox_tiles) as usize,
            partial: shape.m * shape.n * 2,
            nodebuf: (nodes * nodes) as usize * rows * shape.n * 2,
            unfused_flags: 4 * if nodes > 1 {
                ReduceNodesParams::flag_words(w, nodes, world.local_world_size)
            } else {
                w * FLAG_STRIDE
            } as usize,
            nodes,
        }
    }

    fn total(&self) -> usize {
        let a = |b: usize| b.max(1).next_multiple_of(HEAP_ALIGN);
        let nodebufs = if self.nodes > 1 { 2 * a(self.nodebuf) } else { 0 };
        a(self.out) + a(self.staging) + a(self.flags) + 2 * a(self.partial) + nodebufs + a(self.unfused_flags)
    }
}

/// A bound GEMM + ReduceScatter / AllReduce (see the module docs).
pub struct GemmRs<'a> {
    comm: &'a Communicator,
    shape: GemmShape,
    collective: Collective,
    path: Path,
    path_source: &'static str,
    out_f32: bool,
    unfused: Unfused<'a>,
    out: HeapRegion<'a>,
    _staging: HeapRegion<'a>,
    _flags: HeapRegion<'a>,
    _peers: DeviceBuffer<PeerTable>,
    _out_maps: DeviceBuffer<TensorMap>,
    _maps: DeviceBuffer<TensorMap>,
    _launches: DeviceBuffer<u64>,
    diag: DiagBuffers,
    params: GemmRsParams,
    kernel: kernels::Kernel<GemmRsParams>,
    engines: Option<Engines>,
}

/// The copy engines' side of the fused launch ([`GemmRsOptions::engines`]): one step per band
/// (wait for its counter, then a peer's data and flags in turn).
struct Engines {
    /// The band counters (`GemmRsParams::engine_counts`): zero between launches.
    _counts: DeviceBuffer<u32>,
    stream: CopyStream,
}

impl Engines {
    /// Allocate the counters (into `p.engine_counts`) and plan the band steps over `table`.
    fn new(gpu: &Gpu, p: &mut GemmRsParams, table: &PeerTable) -> Result<Engines> {
        let counts = gpu.upload(&vec![0u32; p.engine_counts_len() as usize])?;
        p.engine_counts = counts.addr();
        Ok(Engines { _counts: counts, stream: CopyStream::new(gpu, band_steps(p, table))? })
    }
}

/// Every band step of a fused launch with the copy engines, in the order the walk finishes
/// them: my partials of each other rank's block into its inbox (my slot there) with their
/// `part` flags, band by band; for the all-reduce, merged in, my reduced block into each other
/// rank's output with its `done` flags, band by band but for the last `engine_tail`. A block's tile `i` (grouped order) is
/// sent in round `i` of the walk and, for my own block, summed in round `lead + i`
/// (`sched::OwnerTiles`), so a band is done at the round of its last tile. Slots of a band,
/// their half tiles and their flags are contiguous on both sides (`GemmRsParams::slot_offset`,
/// `part_flag`), as are a band's rows of a block.
fn band_steps(p: &GemmRsParams, table: &PeerTable) -> Vec<CopyStep> {
    let flag_bytes = |halves: u32| (halves * FLAG_STRIDE * 4) as usize;
    let es = if p.gemm.out_f32 != 0 { 4 } else { 2 };
    let row_bytes = p.gemm.n as u64 * es;
    let me = p.local_rank as usize;
    let phases = if p.all_reduce != 0 { 2 } else { 1 };
    let mut steps = Vec::new();
    for phase in 0..phases {
        // The reduced block's last `engine_tail` bands are the helpers' to push.
        for b in (0..p.bands()).filter(|&b| phase == 0 || p.engines_copy_reduced(b)) {
            let (first, _) = p.band_slots(b);
            let halves = p.band_halves(b);
            let copies = (1..p.local_world)
                .map(|i| {
                    let lr = crate::sched::next_peer(p.local_rank, p.local_world, i);
                    let (to, q) = (lr as usize, p.rank - p.local_rank + lr);
                    if phase == 0 {
                        let data = Span {
                            dst: table.staging[to] + p.slot_offset(p.rank, first, 0),
                            src: p.staging + p.outbox_offset(q, first, 0),
                            bytes: halves as usize * HALF_TILE_BYTES as usize,
                        };
                        let flags = Span {
                            dst: table.flags[to] + 4 * p.part_flag(p.rank, first, 0) as u64,
                            src: p.flags + 4 * p.part_mirror(q, first, 0) as u64,
                            bytes: flag_bytes(halves),
                        };
                        (data, flags)
                    } else {
                        let (r0, r1) = p.band_rows(b);
                        let at = r0 as u64 * row_bytes;
                        let bytes = ((r1 - r0) as u64 * row_bytes) as usize;
                        let done = 4 * p.done_flag(p.rank, first, 0) as u64;
                        let flags =
                            Span { dst: table.flags[to] + done, src: p.flags + done, bytes: flag_bytes(halves) };
                        (Span { dst: table.out[to] + at, src: table.out[me] + at, bytes }, flags)
                    }
                })
                .collect();
            let counter = p.engine_counts + 4 * p.engine_count(phase, b) as u64;
            let done_at = p.band_slots(b).1 - 1 + if phase == 0 { 0 } else { p.lead };
            steps.push(((done_at, phase), CopyStep { counter, target: p.engine_target(phase, b), copies }));
        }
    }
    // Stable: ties keep the sends first.
    steps.sort_by_key(|&(key, _)| key);
    steps.into_iter().map(|(_, step)| step).collect()
}

impl<'a> GemmRs<'a> {
    /// Collective: validate (typed errors name the argument and the rule), agree on the shape
    /// across ranks, allocate the output, staging slots and flags from the communicator's heap,
    /// encode the tensor maps. `shape.k` is the whole K: this rank's `a` is `[M, K/W]` and `b`
    /// `[K/W, N]` (`BLayout::KN`) or `[N, K/W]`. The result is in [`GemmRs::output_bytes`] (typed:
    /// [`GemmRs::output_bf16`], [`GemmRs::output_f32`]).
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &'a Communicator,
        gpu: &Gpu,
        collective: Collective,
        shape: GemmShape,
        b_layout: BLayout,
        a: impl Into<DeviceSlice<'a, bf16>>,
        b: impl Into<DeviceSlice<'a, bf16>>,
        opts: GemmRsOptions,
    ) -> Result<Self> {
        let world = comm.world().clone();
        let (a, b) = (a.into(), b.into());
        let w = world.world_size as usize;
        let lw = world.local_world_size as usize;
        if lw > MAX_LOCAL_RANKS {
            return Err(invalid("world", format!("{lw} ranks on a node; at most {MAX_LOCAL_RANKS}")));
        }
        if shape.m == 0 || !shape.m.is_multiple_of(w) {
            return Err(invalid(
                "m",
                format!("{} must be a positive multiple of the world size {w} (row blocks)", shape.m),
            ));
        }
        if shape.k == 0 || !shape.k.is_multiple_of(8 * w) {
            return Err(invalid(
                "k",
                format!("{} must be a multiple of 8 x the world size {w}: each rank holds K/{w} columns of A, in 16-byte rows", shape.k),
            ));
        }
        if opts.group_m == 0 {
            return Err(invalid("group_m", "must be at least 1"));
        }
        let local = GemmShape { m: shape.m, n: shape.n, k: shape.k / w };
        local.validate(a.len(), b.len(), usize::MAX)?;
        let asked_lead = opts.lead;
        let fit = Fit { transport: comm.transport(), sms: gpu.info().sm_count };
        let (opts, tuned_path) = with_tuned(&opts, collective, shape, &world, Some(fit));
        let (path, path_source) = match (opts.path, tuned_path) {
            (PathChoice::Unfused, _) => (Path::Unfused, "asked"),
            (PathChoice::Fused, _) => (Path::Fused, "asked"),
            (PathChoice::Auto, Some(p)) => (p, "tuned table"),
            (PathChoice::Auto, None) => (Path::Fused, "default"),
        };
        let one_shot = one_shot(&opts, collective, shape, &world)?;
        form_takes_lead(one_shot, asked_lead)?;
        let engines = engines(&opts, asked_lead, collective, shape, &world, one_shot)?;
        let push = pushes(&opts, collective, &world, (one_shot, engines))?;
        let prefetch = prefetches(&opts, &world, (one_shot, push))?;
        let pull_reduced = pulls_reduced(&opts, collective, shape, &world, (one_shot, engines))?;
        let rows = shape.m / w;
        let per_owner = GemmRsParams::per_owner(rows as u32, shape.n as u32);
        let (bands, band_tiles, _) = GemmRsParams::band_shape(rows as u32, shape.n as u32, opts.group_m);
        let engine_tail = engine_tail(&opts, collective, engines, bands)?;
        let roles = role_split(&opts, collective, world.nodes, w as u32 * per_owner, gpu.info().sm_count)?;
        let waves = w as u32 * per_owner / roles.compute.max(1);
        // The copy engines' sends leave a band at a time, not a wave of tiles at once.
        let stagger_ns = staggers(&opts, &world, push && !one_shot && !engines, waves)?;
        // The group size is protocol (readers wait for a group's last flag): ranks agree on it;
        // role counts are each rank's own business.
        let group = opts.group.unwrap_or(DEFAULT_GROUP).min(per_owner);
        // One shot: one fixed walk (the lead only orders two-phase sends). Several nodes: the
        // lead is protocol too (sched::NodeTiles' no-cycle argument is for a node's ranks walking
        // the same rounds), so ranks whose role splits differ (a tuned inter-reduce count their
        // SMs cannot take) must pass the same `lead`; otherwise `agree` names them.
        let lead = if one_shot {
            per_owner
        } else if engines {
            // Not the tuned table's: it was measured with per-tile flags.
            engine_lead(asked_lead, band_tiles, per_owner)?
        } else {
            opts.lead.unwrap_or(default_lead(collective, &world, roles.compute)).min(per_owner)
        };
        comm.agree(
            "shape",
            &format!(
                "{} {}x{}x{} {b_layout:?} {} out, {}, {} nodes, group {group}, one shot {one_shot}, push {push}, engines {engines}, pull reduced {pull_reduced}{}{}",
                collective.op_name(),
                shape.m,
                shape.n,
                shape.k,
                if opts.out_f32 { "f32" } else { "bf16" },
                path.name(),
                world.nodes,
                // One shot blocks each tile on every rank's partial of it: the walks must match.
                if one_shot { format!(", walk group_m {}", opts.group_m) } else { String::new() },
                if world.nodes > 1 { format!(", lead {lead}") } else { String::new() }
            ),
        )?;

        let es = if opts.out_f32 { 4 } else { 2 };
        let sizes = Sizes::of(collective, shape, &world, opts.out_f32, (one_shot, push, engines));
        let out = comm.alloc(sizes.out)?;
        let staging = comm.alloc(sizes.staging)?;
        let flags = comm.alloc(sizes.flags)?;
        // Where block `block` starts in rank `owner`'s output (a reduce-scatter's is one block).
        let block_at = |owner: u32, block: u32| -> Result<u64> {
            let base =
                out.peer(owner).ok_or_else(|| invalid("world", format!("rank {owner}'s heap is not mapped here")))?;
            Ok(if collective == Collective::AllReduce {
                base + (block as usize * rows * shape.n * es) as u64
            } else {
                base
            })
        };
        // Where my row block starts in each local rank's output; one shot: where block d
        // starts in mine.
        let block = |d: u32| if one_shot { block_at(world.rank, d) } else { block_at(d, world.rank) };
        let mut table = PeerTable::default();
        // Entries d: my block of local rank d's output; pulling reduced tiles, also d's block
        // of its own output and of mine (abi::GemmRsParams::pull_reduced).
        let mut out_maps = vec![<TensorMap as bytemuck::Zeroable>::zeroed(); 3 * MAX_LOCAL_RANKS];
        for d in 0..world.local_world_size {
            let r = world.local_to_global(d);
            let missing = || invalid("world", format!("rank {r}'s heap is not mapped here"));
            table.staging[d as usize] = staging.peer(r).ok_or_else(missing)?;
            table.flags[d as usize] = flags.peer(r).ok_or_else(missing)?;
            table.out[d as usize] = block(r)?;
            if !opts.out_f32 {
                let dims = [shape.n as u64, rows as u64];
                let map = |at: u64| super::gemm::bf16_sw128(at, dims, 2 * shape.n as u64, [64, 64]).encode();
                out_maps[d as usize] = map(table.out[d as usize])?;
                if pull_reduced {
                    out_maps[MAX_LOCAL_RANKS + d as usize] = map(block_at(r, r)?)?;
                    out_maps[2 * MAX_LOCAL_RANKS + d as usize] = map(block_at(world.rank, r)?)?;
                }
            }
        }
        let peers = gpu.upload(&[table])?;
        let out_maps_buf = gpu.upload(&out_maps)?;
        let launches = gpu.upload(&[0u64])?;
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let gopts = GemmOptions { ctas: None, group_m: opts.group_m, timeout: opts.timeout, ..Default::default() }
            .whole_tiles();
        let c = CAddr { addr: out.addr(), f32: opts.out_f32 };
        let (mut gemm, maps) = super::gemm::plan(
            gpu,
            local,
            b_layout,
            a.addr(),
            b.addr(),
            c,
            &gopts,
            &diag,
            (crate::gpu::L2Promotion::B128, TILE_M),
        )?;
        gemm.roles = roles;
        let mut params = GemmRsParams {
            gemm,
            staging: staging.addr(),
            flags: flags.addr(),
            peers: peers.addr(),
            out_maps: out_maps_buf.addr(),
            launches: launches.addr(),
            rows: rows as u32,
            rank: world.rank,
            world: w as u32,
            local_rank: world.local_rank,
            local_world: world.local_world_size,
            all_reduce: (collective == Collective::AllReduce) as u32,
            lead,
            nodes: world.nodes,
            fifo: comm.fifo_params(),
            staging_heap_off: staging.offset(),
            flags_heap_off: flags.offset(),
            group,
            one_shot: one_shot as u32,
            push: push as u32,
            prefetch: prefetch as u32,
            pull_reduced: pull_reduced as u32,
            stagger_ns,
            engine_counts: 0,
            engine_tail,
            _pad: 0,
        };
        let engines = if engines { Some(Engines::new(gpu, &mut params, &table)?) } else { None };
        let kernel = match (world.nodes > 1, one_shot, b_layout) {
            (false, false, BLayout::KN) => kernels::GEMM_RS_KN,
            (false, false, BLayout::NK) => kernels::GEMM_RS_NK,
            (false, true, BLayout::KN) => kernels::GEMM_AR_ONE_SHOT_KN,
            (false, true, BLayout::NK) => kernels::GEMM_AR_ONE_SHOT_NK,
            (true, _, BLayout::KN) => kernels::GEMM_RS_NODES_KN,
            (true, _, BLayout::NK) => kernels::GEMM_RS_NODES_NK,
        };
        let unfused = Self::unfused(comm, gpu, collective, local, b_layout, (a.addr(), b.addr()), &out, &opts)?;
        comm.barrier()?;
        Ok(GemmRs {
            comm,
            shape,
            collective,
            path,
            path_source,
            out_f32: opts.out_f32,
            unfused,
            out,
            _staging: staging,
            _flags: flags,
            _peers: peers,
            _out_maps: out_maps_buf,
            _maps: maps,
            _launches: launches,
            diag,
            params,
            kernel,
            engines,
        })
    }

    #[allow(clippy::too_many_arguments)]
    fn unfused(
        comm: &'a Communicator,
        gpu: &Gpu,
        collective: Collective,
        local: GemmShape,
        b_layout: BLayout,
        (a, b): (u64, u64),
        out: &HeapRegion<'a>,
        opts: &GemmRsOptions,
    ) -> Result<Unfused<'a>> {
        let out_f32 = opts.out_f32;
        let world = comm.world();
        let w = world.world_size;
        // The unfused path's buffers do not depend on the fused path's form.
        let sizes = Sizes::of(
            collective,
            GemmShape { k: local.k * w as usize, ..local },
            world,
            out_f32,
            (false, false, false),
        );
        let partials = [comm.alloc(sizes.partial)?, comm.alloc(sizes.partial)?];
        let nodebufs =
            if world.nodes > 1 { vec![comm.alloc(sizes.nodebuf)?, comm.alloc(sizes.nodebuf)?] } else { vec![] };
        let flags = comm.alloc(sizes.unfused_flags)?;
        let launches = gpu.upload(&[0u64])?;
        let counters = gpu.upload(&[0u32; 2])?;
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let gemm = |p: &HeapRegion<'a>| {
            let gopts = GemmOptions { ctas: None, group_m: opts.group_m, timeout: opts.timeout, ..Default::default() }
                .whole_tiles();
            Gemm::at(gpu, local, b_layout, (a, b), CAddr { addr: p.addr(), f32: false }, gopts)
        };
        let gemms = [gemm(&partials[0])?, gemm(&partials[1])?];
        let rows = (local.m / w as usize) as u32;
        let timeout_ns = opts.timeout.as_nanos().min(u64::MAX as u128) as u64;
        let missing = |r: u32| invalid("world", format!("rank {r}'s heap is not mapped here"));
        let reduce = if world.nodes == 1 {
            let reduce = |p: &HeapRegion<'a>| -> Result<ReduceParams> {
                let mut r = ReduceParams {
                    out: out.addr(),
                    flags: flags.addr(),
                    launches: launches.addr(),
                    diag: diag.abi(),
                    timeout_ns,
                    row0: if collective == Collective::AllReduce { 0 } else { world.rank * rows },
                    rows: if collective == Collective::AllReduce { local.m as u32 } else { rows },
                    n: local.n as u32,
                    world: w,
                    rank: world.rank,
                    out_f32: out_f32 as u32,
                    rows_per_owner: rows,
                    ..Default::default()
                };
                for d in 0..w {
                    r.partials[d as usize] = p.peer(d).ok_or_else(|| missing(d))?;
                    r.peer_flags[d as usize] = flags.peer(d).ok_or_else(|| missing(d))?;
                }
                Ok(r)
            };
            Reduce::Pull([reduce(&partials[0])?, reduce(&partials[1])?])
        } else {
            let reduce = |parity: usize| -> Result<ReduceNodesParams> {
                let mut r = ReduceNodesParams {
                    nodebuf: nodebufs[parity].addr(),
                    nodebuf_heap_off: nodebufs[parity].offset(),
                    flags: flags.addr(),
                    flags_heap_off: flags.offset(),
                    counters: counters.addr(),
                    launches: launches.addr(),
                    fifo: comm.fifo_params(),
                    diag: diag.abi(),
                    timeout_ns,
                    rows,
                    n: local.n as u32,
                    rank: world.rank,
                    local_world: world.local_world_size,
                    nodes: world.nodes,
                    all_reduce: (collective == Collective::AllReduce) as u32,
                    out_f32: out_f32 as u32,
                    ..Default::default()
                };
                for lr in 0..world.local_world_size {
                    let d = world.local_to_global(lr);
                    r.partials[lr as usize] = partials[parity].peer(d).ok_or_else(|| missing(d))?;
                    r.out[lr as usize] = out.peer(d).ok_or_else(|| missing(d))?;
                    r.peer_flags[lr as usize] = flags.peer(d).ok_or_else(|| missing(d))?;
                }
                Ok(r)
            };
            Reduce::Nodes([reduce(0)?, reduce(1)?])
        };
        Ok(Unfused {
            gemms,
            reduce,
            _partials: partials,
            _nodebufs: nodebufs,
            _flags: flags,
            _launches: launches,
            _counters: counters,
            diag,
            calls: Cell::new(0),
        })
    }

    /// The path [`GemmRs::launch`] runs.
    pub fn path(&self) -> Path {
        self.path
    }

    /// What [`GemmRs::launch`] runs and why, for logs: `fused (tuned table)`, `unfused (asked)`,
    /// `fused (default)` (no measured shape near).
    pub fn describe_path(&self) -> String {
        format!("{} ({})", self.path.name(), self.path_source)
    }

    /// Which collective.
    pub fn collective(&self) -> Collective {
        self.collective
    }

    /// The shape (M in all, K in all).
    pub fn shape(&self) -> GemmShape {
        self.shape
    }

    /// Compute CTAs of the fused launch.
    pub fn ctas(&self) -> u32 {
        self.params.gemm.roles.compute
    }

    /// The fused launch's role split (several nodes: compute, inter-send and inter-reduce CTAs).
    pub fn roles(&self) -> RoleSplit {
        self.params.gemm.roles
    }

    /// Tiles per FIFO WRITE of a node partial, as launched (several nodes).
    pub fn group(&self) -> u32 {
        self.params.group
    }

    /// Bytes this rank's fused launch sends over the inter-node link (node partials; 0 on one
    /// node): what a NIC model turns into the inter-node time.
    pub fn inter_node_bytes(&self) -> u64 {
        inter_node_bytes(self.collective, self.shape, self.comm.world())
    }

    /// Bytes of symmetric heap an op of this collective and shape (all of K) with these options
    /// takes on `world` (both paths; allocations aligned as the communicator aligns them).
    pub fn heap_bytes(collective: Collective, shape: GemmShape, world: &World, opts: &GemmRsOptions) -> usize {
        // Options the op would refuse size as their default does (`new` reports them).
        // The form is a one-node knob: no transport needed.
        let asked_lead = opts.lead;
        let (opts, _) = with_tuned(opts, collective, shape, world, None);
        let one_shot = one_shot(&opts, collective, shape, world).unwrap_or(false);
        let engines = engines(&opts, asked_lead, collective, shape, world, one_shot).unwrap_or(false);
        let push = pushes(&opts, collective, world, (one_shot, engines)).unwrap_or(false);
        Sizes::of(collective, shape, world, opts.out_f32, (one_shot, push, engines)).total()
    }

    /// Whether the fused all-reduce runs one shot ([`GemmRsOptions::one_shot`]).
    pub fn one_shot(&self) -> bool {
        self.params.one_shot != 0
    }

    /// Whether the fused kernel's sources push their partials ([`GemmRsOptions::push`]).
    pub fn push(&self) -> bool {
        self.params.push != 0
    }

    /// Whether the fused kernel's send tiles prefetch the own tiles' partials
    /// ([`GemmRsOptions::prefetch`]).
    pub fn prefetch(&self) -> bool {
        self.params.prefetch != 0
    }

    /// The first sends' stagger in ns ([`GemmRsOptions::stagger_ns`]).
    pub fn stagger_ns(&self) -> u32 {
        self.params.stagger_ns
    }

    /// Whether the all-reduce's ranks pull each other's reduced tiles
    /// ([`GemmRsOptions::pull_reduced`]).
    pub fn pull_reduced(&self) -> bool {
        self.params.pull_reduced != 0
    }

    /// Rounds of sends before the first own tile, as launched (the option or its default, at
    /// most the tiles per owner).
    pub fn lead(&self) -> u32 {
        self.params.lead
    }

    /// The result (bf16 unless f32 output was asked for), `[M/W, N]` (reduce-scatter: this
    /// rank's rows) or `[M, N]`: valid after a launch completes, until the next one starts.
    pub fn output_bytes(&self) -> DeviceSlice<'_, u8> {
        self.out.bytes_view()
    }

    /// The output as bf16 (bf16 output only).
    pub fn output_bf16(&self) -> Option<DeviceSlice<'_, bf16>> {
        (!self.out_f32).then(|| self.out.view::<bf16>())
    }

    /// The output as f32 (f32 output only).
    pub fn output_f32(&self) -> Option<DeviceSlice<'_, f32>> {
        self.out_f32.then(|| self.out.view::<f32>())
    }

    /// Enqueue one call through [`GemmRs::path`] (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        self.launch_path(gpu, self.path)
    }

    /// Enqueue one call through `path`.
    pub fn launch_path(&self, gpu: &Gpu, path: Path) -> Result<()> {
        match path {
            Path::Fused => self.launch_fused(gpu),
            Path::Unfused => {
                let u = &self.unfused;
                let parity = (u.calls.get() % 2) as usize;
                u.calls.set(u.calls.get() + 1);
                u.gemms[parity].launch(gpu)?;
                self.launch_reduce(gpu, parity)
            }
        }
    }

    fn launch_fused(&self, gpu: &Gpu) -> Result<()> {
        let cfg = LaunchConfig::linear(self.params.gemm.roles.total(), THREADS, SMEM_BYTES);
        let Some(e) = &self.engines else {
            // SAFETY: every address in params belongs to buffers this op owns or borrows for 'a
            // (peers' heaps stay mapped while the communicator lives).
            unsafe { gpu.launch(self.kernel, &cfg, &self.params)? };
            return Ok(());
        };
        // An earlier report leaves the abort word set: refuse before enqueueing anything.
        self.diag.check()?;
        // SAFETY: as above; the band counters are this op's, the spans lie in this op's staging,
        // flags and output and the peers' (mapped while the communicator lives), and the
        // stream's waits end: a kernel whose helpers' waits give up still publishes every band,
        // and one whose pipeline waits give up traps, which ends the context's streams with it.
        unsafe {
            e.stream.around(gpu, || {
                gpu.launch(self.kernel, &cfg, &self.params)?;
                Ok(())
            })
        }
    }

    /// Whether the copy engines move the partials ([`GemmRsOptions::engines`]).
    pub fn engines(&self) -> bool {
        self.engines.is_some()
    }

    /// The all-reduce's last bands the helpers push with the copy engines on
    /// ([`GemmRsOptions::engine_tail`]).
    pub fn engine_tail(&self) -> u32 {
        self.params.engine_tail
    }

    /// The GEMM alone (this rank's partial, into the unfused path's buffer).
    pub fn launch_gemm_only(&self, gpu: &Gpu) -> Result<()> {
        self.unfused.gemms[0].launch(gpu)
    }

    fn launch_reduce(&self, gpu: &Gpu, parity: usize) -> Result<()> {
        // One CTA per SM: every CTA resident at once (mk_reduce_nodes's phases wait for each other).
        let cfg = LaunchConfig::linear(gpu.info().sm_count, 256, 0);
        // SAFETY: the partials, node partials, flags and outputs belong to this op / the
        // communicator's heap (peers' heaps stay mapped while it lives); the FIFO is its.
        unsafe {
            match &self.unfused.reduce {
                Reduce::Pull(p) => gpu.launch(kernels::REDUCE_PULL, &cfg, &p[parity])?,
                Reduce::Nodes(p) => gpu.launch(kernels::REDUCE_NODES, &cfg, &p[parity])?,
            }
        };
        Ok(())
    }

    /// Wait for this rank's launches; report a device-side timeout.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        self.diag.wait(gpu, self.collective.op_name(), || {
            self.unfused.diag.check()?;
            for g in &self.unfused.gemms {
                g.check_diag()?;
            }
            self.comm.check()
        })
    }

    /// Launch and wait.
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.wait(gpu)
    }
}

impl super::TwoPathOp for GemmRs<'_> {
    fn launch_path(&self, gpu: &Gpu, path: Path) -> Result<()> {
        GemmRs::launch_path(self, gpu, path)
    }

    fn wait(&self, gpu: &Gpu) -> Result<()> {
        GemmRs::wait(self, gpu)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mkernel_device::kernels_info::gemm::TILE_N;

    #[test]
    fn role_split_defaults_and_rules() {
        let rs = Collective::ReduceScatter;
        let def = GemmRsOptions::default();
        assert_eq!(role_split(&def, rs, 1, 4096, 132).unwrap(), RoleSplit::compute_only(132));
        assert_eq!(role_split(&def, rs, 1, 16, 132).unwrap(), RoleSplit::compute_only(16));
        let two = role_split(&def, rs, 2, 4096, 132).unwrap();
        assert_eq!((two.compute, two.intra_comm, two.inter_send, two.inter_reduce), (115, 0, 1, 16));
        let ar = role_split(&def, Collective::AllReduce, 2, 4096, 132).unwrap();
        assert_eq!((ar.compute, ar.inter_send, ar.inter_reduce), (99, 1, 32));
        let tiny = role_split(&def, rs, 2, 16, 132).unwrap();
        assert_eq!(tiny.compute, 16, "no more compute CTAs than tiles");
        let err = |o: GemmRsOptions, nodes| role_split(&o, rs, nodes, 4096, 132).unwrap_err().to_string();
        assert!(err(GemmRsOptions { inter_send: Some(0), ..def.clone() }, 2).contains("`inter_send`"));
        assert!(err(GemmRsOptions { inter_reduce: Some(0), ..def.clone() }, 2).contains("`inter_reduce`"));
        assert!(err(GemmRsOptions { group: Some(0), ..def.clone() }, 2).contains("`group`"));
        assert!(err(GemmRsOptions { inter_reduce: Some(131), ..def.clone() }, 2).contains("no compute CTA"));
        assert!(err(GemmRsOptions { group: Some(4), ..def.clone() }, 1).contains("several nodes only"));
    }

    #[test]
    fn inter_node_bytes_count_each_destination_node() {
        let shape = GemmShape { m: 16384, n: 4096, k: 8192 };
        let half_tiles = |w: usize| 2 * (shape.m / w).div_ceil(128) as u64 * shape.n.div_ceil(256) as u64;
        let ht = HALF_TILE_BYTES as u64;
        let rs = Collective::ReduceScatter;
        assert_eq!(inter_node_bytes(rs, shape, &World::test(0, 2, 1)), 0);
        // Reduce-scatter: the node partial of each other node's block I collect, once.
        assert_eq!(inter_node_bytes(rs, shape, &World::test(1, 2, 2)), half_tiles(2) * ht);
        assert_eq!(inter_node_bytes(rs, shape, &World::test(3, 4, 2)), half_tiles(4) * ht);
        assert_eq!(inter_node_bytes(rs, shape, &World::test(2, 4, 4)), 3 * half_tiles(4) * ht);
        // All-reduce: each block I collect (one per node) to every other node.
        let ar = Collective::AllReduce;
        assert_eq!(inter_node_bytes(ar, shape, &World::test(0, 2, 2)), 2 * half_tiles(2) * ht);
        assert_eq!(inter_node_bytes(ar, shape, &World::test(2, 4, 4)), 12 * half_tiles(4) * ht);
    }

    #[test]
    fn tuned_knobs_apply_where_they_were_measured_and_fit() {
        let ar = Collective::AllReduce;
        let big = GemmShape { m: 16384, n: 8192, k: 8192 };
        let nodes = World::test(0, 2, 2);
        let def = GemmRsOptions::default();
        let nic = Fit { transport: "emulated-nic", sms: 132 };
        // The embedded table holds an entry for this shape over the emulated NIC.
        let (o, path) = with_tuned(&def, ar, big, &nodes, Some(nic));
        let ir = o.inter_reduce.expect("an inter-reduce count from the table");
        assert!(path.is_some());
        // Not over another transport, not without one, not where it would leave no compute CTA,
        // not when told to ignore the table, and never over an explicit option.
        assert_eq!(with_tuned(&def, ar, big, &nodes, Some(Fit { transport: "verbs", ..nic })).0.inter_reduce, None);
        assert_eq!(with_tuned(&def, ar, big, &nodes, None).0.inter_reduce, None);
        assert_eq!(with_tuned(&def, ar, big, &nodes, Some(Fit { sms: ir + 1, ..nic })).0.inter_reduce, None);
        let untuned = GemmRsOptions { tuned: false, ..def.clone() };
        assert_eq!(with_tuned(&untuned, ar, big, &nodes, Some(nic)), (untuned.clone(), None));
        let asked = GemmRsOptions { inter_reduce: Some(5), ..def.clone() };
        assert_eq!(with_tuned(&asked, ar, big, &nodes, Some(nic)).0.inter_reduce, Some(5));
        // A lead is the two-phase form's.
        assert!(form_takes_lead(true, Some(3)).unwrap_err().to_string().contains("`lead`"));
        assert!(form_takes_lead(true, None).is_ok() && form_takes_lead(false, Some(3)).is_ok());
    }

    #[test]
    fn default_lead_rules() {
        let (ar, rs) = (Collective::AllReduce, Collective::ReduceScatter);
        let one = |w| World::test(0, w, 1);
        // Two waves of 132 CTAs in rounds of `world` tiles.
        assert_eq!(default_lead(rs, &one(4), 132), 66);
        assert_eq!(default_lead(rs, &one(8), 132), 33);
        assert_eq!(default_lead(rs, &one(4), 1), 1, "at least one round");
        // Every send first at world 2 and for the all-reduce.
        assert_eq!(default_lead(rs, &one(2), 132), u32::MAX);
        assert_eq!(default_lead(ar, &one(4), 132), u32::MAX);
        // Several nodes: one wave of the first half's rounds ((nodes - 1) x local ranks wide).
        assert_eq!(default_lead(rs, &World::test(0, 4, 2), 115), 57);
        assert_eq!(default_lead(ar, &World::test(0, 4, 2), 67), 33);
        assert_eq!(default_lead(rs, &World::test(0, 16, 2), 115), 14);
        assert_eq!(default_lead(rs, &World::test(0, 2, 2), 115), 115);
    }

    #[test]
    fn stagger_rules() {
        let (node, two, nodes) = (World::test(0, 4, 1), World::test(0, 2, 1), World::test(0, 4, 2));
        let def = GemmRsOptions::default();
        // 16384x4096x8192 at 1 x 4: 2048 tiles over 132 CTAs; 2048x4096x4096: 256.
        let (long, short) = (2048 / 132, 256 / 132);
        assert_eq!(
            staggers(&def, &node, true, long).unwrap(),
            DEFAULT_STAGGER_NS,
            "measured: 1 x 4, pushed, both collectives"
        );
        assert_eq!(staggers(&def, &node, true, short).unwrap(), 0, "two waves: slower");
        assert_eq!(staggers(&def, &node, false, long).unwrap(), 0, "owners pulling");
        assert_eq!(staggers(&def, &two, true, long).unwrap(), 0, "two ranks: level");
        assert_eq!(staggers(&def, &nodes, true, long).unwrap(), 0, "2 x 2: 1% slower or level");
        let asked = GemmRsOptions { stagger_ns: Some(1000), ..Default::default() };
        assert_eq!(staggers(&asked, &two, false, short).unwrap(), 1000);
        let big = GemmRsOptions { stagger_ns: Some(MAX_STAGGER_NS + 1), ..Default::default() };
        let err = staggers(&big, &node, true, long).unwrap_err().to_string();
        assert!(err.contains("stagger_ns") && err.contains("at most"), "{err}");
    }

    #[test]
    fn copy_engine_rules() {
        let rs = Collective::ReduceScatter;
        let node = World::test(1, 4, 1);
        let on = GemmRsOptions { engines: Some(true), ..Default::default() };
        let def = GemmRsOptions::default();
        let big = GemmShape { m: 16384, n: 4096, k: 8192 };
        let e = |o: &GemmRsOptions, c: Collective, shape: GemmShape, w: &World| {
            engines(o, o.lead, c, shape, w, false).unwrap()
        };
        let (two, ar) = (World::test(0, 2, 1), Collective::AllReduce);
        assert!(!e(&def, rs, big, &node), "off by default above two ranks (not measured)");
        assert!(e(&on, rs, big, &node) && e(&on, rs, big, &two));
        // On by default at two ranks where measured: the reduce-scatter from 64 MiB of partial,
        // the all-reduce from 128 MiB and 8 bands.
        assert!(e(&def, rs, big, &two) && e(&def, rs, GemmShape { m: 8192, n: 4096, k: 4096 }, &two));
        assert!(!e(&def, rs, GemmShape { m: 2048, n: 4096, k: 4096 }, &two));
        assert!(e(&def, ar, big, &two) && e(&def, ar, GemmShape { m: 16384, n: 8192, k: 8192 }, &two));
        assert!(!e(&def, ar, GemmShape { m: 8192, n: 8192, k: 8192 }, &two), "4 bands");
        assert!(!e(&def, ar, GemmShape { m: 8192, n: 4096, k: 4096 }, &two), "64 MiB");
        // Not where another option asks for a form the engines exclude.
        for o in [
            GemmRsOptions { push: Some(false), ..def.clone() },
            GemmRsOptions { push: Some(true), ..def.clone() },
            GemmRsOptions { prefetch: Some(true), ..def.clone() },
            GemmRsOptions { pull_reduced: Some(true), ..def.clone() },
            // A lead of the caller's below a band (128 tiles here): the walk it asked for.
            GemmRsOptions { lead: Some(66), ..def.clone() },
        ] {
            assert!(!e(&o, ar, big, &two));
        }
        assert!(e(&GemmRsOptions { lead: Some(128), ..def.clone() }, ar, big, &two), "a band's lead");
        for (w, one_shot) in [(World::test(0, 4, 2), false), (node.clone(), true), (World::test(0, 1, 1), false)] {
            let e = engines(&on, None, rs, big, &w, one_shot).unwrap_err().to_string();
            assert!(e.starts_with("invalid argument `engines`"), "{e}");
        }
        // They push, at two ranks too; owners pulling or reduced tiles pulled are refused.
        assert!(pushes(&def, rs, &World::test(0, 2, 1), (false, true)).unwrap());
        let pull = GemmRsOptions { push: Some(false), ..on.clone() };
        assert!(pushes(&pull, rs, &node, (false, true)).unwrap_err().to_string().contains("copy engines"));
        let big = GemmShape { m: 16384, n: 8192, k: 8192 };
        let two = World::test(0, 2, 1);
        assert!(!pulls_reduced(&def, Collective::AllReduce, big, &two, (false, true)).unwrap());
        let asked = GemmRsOptions { pull_reduced: Some(true), ..on.clone() };
        assert!(pulls_reduced(&asked, Collective::AllReduce, big, &two, (false, true)).is_err());
        // The engines copy from an outbox.
        let shape = GemmShape { m: 4000, n: 1544, k: 2048 };
        let (with, pushed) = (
            Sizes::of(rs, shape, &node, false, (false, true, true)),
            Sizes::of(rs, shape, &node, false, (false, true, false)),
        );
        assert_eq!(with.staging, 2 * pushed.staging);
        assert_eq!(GemmRs::heap_bytes(rs, shape, &node, &on), with.total());
        // The all-reduce's pushed tail of bands.
        let ar = Collective::AllReduce;
        assert_eq!(engine_tail(&def, ar, true, 4).unwrap(), DEFAULT_ENGINE_TAIL);
        assert_eq!(engine_tail(&def, ar, true, 0).unwrap(), 0);
        assert_eq!((engine_tail(&def, ar, false, 4).unwrap(), engine_tail(&def, rs, true, 4).unwrap()), (0, 0));
        let tail = |t: u32| GemmRsOptions { engine_tail: Some(t), ..on.clone() };
        assert_eq!(engine_tail(&tail(4), ar, true, 4).unwrap(), 4);
        for (o, c, e) in [(tail(5), ar, true), (tail(1), rs, true), (tail(1), ar, false)] {
            let err = engine_tail(&o, c, e, 4).unwrap_err().to_string();
            assert!(err.starts_with("invalid argument `engine_tail`"), "{err}");
        }
    }

    /// With the copy engines an own tile waits for its whole band of every peer's partials. With
    /// the leads [`engine_lead`] allows, each of those sends comes at an earlier walk position
    /// (on the real rotated walk) than the own tile, so CTAs that take their tiles in position
    /// order cannot wait on each other in a cycle; lead 0 breaks it (the check can fail).
    #[test]
    fn engine_leads_put_every_band_before_its_own_tiles() {
        use crate::sched::{OwnerTiles, TileGrid, TileScheduler};
        let cases = [
            (2, 4096, 4096, 8, 132),
            (4, 4096, 8192, 8, 132),
            (4, 1000, 1544, 3, 131),
            (2, 2048, 528, 1, 133),
            (4, 4096, 4096, 4, 132),
            (2, 300, 8, 8, 7),
        ];
        for (w, rows, n, group_m, ctas) in cases {
            let (m_tiles, n_tiles) = (u32::div_ceil(rows, TILE_M), u32::div_ceil(n, TILE_N));
            let per = m_tiles * n_tiles;
            let band_tiles = group_m.min(m_tiles) * n_tiles;
            let (bands, tiles, _) = GemmRsParams::band_shape(rows, n, group_m);
            assert_eq!((bands, tiles), (m_tiles.div_ceil(group_m), band_tiles));
            let grid = TileGrid { m_tiles, n_tiles, group_m };
            let band = |local: u32| grid.coords(local).0 / group_m;
            let safe = |lead: u32| {
                let walk = |r: u32| OwnerTiles::new(rows, n, (TILE_M, TILE_N), group_m, w, r, lead).rotated(ctas);
                // The latest position, over the peers' walks, of a send of each band of block 0.
                let mut last = vec![0u32; m_tiles.div_ceil(group_m) as usize];
                for r in 1..w {
                    let t = walk(r);
                    for i in 0..t.count() {
                        if let (0, local) = t.order(i) {
                            let b = band(local) as usize;
                            last[b] = last[b].max(i);
                        }
                    }
                }
                let t = walk(0);
                (0..t.count()).all(|i| match t.order(i) {
                    (0, local) => last[band(local) as usize] < i,
                    _ => true,
                })
            };
            let case = format!("world {w}, {rows} x {n} rows, group {group_m}, {ctas} CTAs");
            assert!(safe(engine_lead(None, band_tiles, per).unwrap()), "{case}: every send first");
            assert!(safe(engine_lead(Some(band_tiles), band_tiles, per).unwrap()), "{case}: a band's lead");
            if band_tiles > 1 {
                let e = engine_lead(Some(band_tiles - 1), band_tiles, per).unwrap_err().to_string();
                assert!(e.starts_with("invalid argument `lead`"), "{e}");
                assert!(!safe(0), "{case}: lead 0 must be caught");
            }
        }
    }

    /// Each (phase, peer)'s band copies cover its region once, contiguously and in order, on
    /// both sides, each band behind one wait on its own counter, whose target counts every half
    /// tile the kernel publishes for it (each peer's partials; the reduced band once), at an
    /// awkward shape: 1000 rows (8 tile rows, in bands of 3,
    /// 3 and 2) by 1544 columns (7 tiles), bf16 and f32 output, world 4 and 2.
    #[test]
    fn band_steps_cover_each_region_once() {
        for (world, local_rank, out_f32) in [(4u32, 1u32, 0u32), (4, 3, 1), (2, 0, 1)] {
            let gemm = crate::abi::GemmParams { n: 1544, group_m: 3, out_f32, ..Default::default() };
            let base = GemmRsParams {
                gemm,
                rows: 1000,
                rank: local_rank,
                world,
                local_rank,
                local_world: world,
                staging: 1 << 40,
                flags: 2 << 40,
                engine_counts: 3 << 40,
                lead: 56,
                ..Default::default()
            };
            let mut table = PeerTable::default();
            for d in 0..world as usize {
                let at = |k: u64| (k + d as u64) << 40;
                (table.staging[d], table.flags[d], table.out[d]) = (at(10), at(20), at(30));
            }
            let per_owner = GemmRsParams::per_owner(1000, 1544);
            assert_eq!((per_owner, base.bands()), (56, 3));
            let es = if out_f32 != 0 { 4 } else { 2 };
            for all_reduce in [0, 1] {
                let p = GemmRsParams { all_reduce, ..base };
                let steps = band_steps(&p, &table);
                assert_eq!(steps.len(), (1 + all_reduce as usize) * 3);
                let mut counters: Vec<u64> = steps.iter().map(|s| s.counter).collect();
                counters.sort();
                counters.dedup();
                assert_eq!(counters.len(), steps.len(), "one counter per band step");
                for (k, step) in steps.iter().enumerate() {
                    let halves: u32 =
                        step.copies.iter().map(|(_, f)| (f.bytes / (FLAG_STRIDE as usize * 4)) as u32).sum();
                    // Phase 0 counts each peer's band of partials; phase 1 my own band once.
                    // Every send first (lead 56): the sends' bands come first.
                    let per_copy = if k < 3 { 1 } else { world - 1 };
                    assert_eq!(step.target * per_copy, halves, "step {k}: the target counts what the step carries");
                    assert_eq!(step.copies.len(), world as usize - 1);
                }
                for phase in 0..=all_reduce as usize {
                    for (i, lr) in (1..world).map(|i| crate::sched::next_peer(local_rank, world, i)).enumerate() {
                        let (q, to, me) = (lr, lr as usize, local_rank as usize);
                        let (data_at, data_from, data_bytes, flags_at, flags_from) = if phase == 0 {
                            (
                                table.staging[to] + p.slot_offset(p.rank, 0, 0),
                                p.staging + p.outbox_offset(q, 0, 0),
                                2 * per_owner as u64 * HALF_TILE_BYTES as u64,
                                table.flags[to] + 4 * p.part_flag(p.rank, 0, 0) as u64,
                                p.flags + 4 * p.part_mirror(q, 0, 0) as u64,
                            )
                        } else {
                            let done = 4 * p.done_flag(p.rank, 0, 0) as u64;
                            (table.out[to], table.out[me], 1000 * 1544 * es, table.flags[to] + done, p.flags + done)
                        };
                        let (mut d, mut f) = ((data_at, data_from), (flags_at, flags_from));
                        for step in &steps[phase * 3..phase * 3 + 3] {
                            let (data, flags) = step.copies[i];
                            assert_eq!((data.dst, data.src), d, "phase {phase} to {lr}: contiguous data");
                            assert_eq!((flags.dst, flags.src), f, "phase {phase} to {lr}: contiguous flags");
                            d = (d.0 + data.bytes as u64, d.1 + data.bytes as u64);
                            f = (f.0 + flags.bytes as u64, f.1 + flags.bytes as u64);
                        }
                        assert_eq!(d.0 - data_at, data_bytes, "phase {phase} to {lr}: the whole region");
                        // The flags end where the next source's (or block's) begin.
                        let end =
                            if phase == 0 { p.part_flag(p.rank + 1, 0, 0) } else { p.done_flag(p.rank + 1, 0, 0) };
                        assert_eq!(f.0 - table.flags[to], 4 * end as u64, "phase {phase} to {lr}: the flags' end");
                    }
                }
            }
            // With own tiles from round 21 (a band's tiles), the reduced bands merge in at the
            // rounds their last tile is summed: bands end at tiles 20, 41 and 55, so the sends'
            // at rounds 20, 41, 55 and the reduced ones' at 41, 62, 76 (ties: sends first).
            let p = GemmRsParams { all_reduce: 1, lead: 21, ..base };
            let order: Vec<(u32, u32)> = band_steps(&p, &table)
                .iter()
                .map(|s| {
                    let i = ((s.counter - p.engine_counts) / 4) as u32;
                    (i / p.bands(), i % p.bands())
                })
                .collect();
            assert_eq!(order, [(0, 0), (0, 1), (1, 0), (0, 2), (1, 1), (1, 2)]);
            // The helpers push the reduced block's last band (engine_tail 1): no step for it.
            let p = GemmRsParams { engine_tail: 1, ..p };
            assert_eq!(band_steps(&p, &table).len(), 5);
            assert!(!p.engines_copy_reduced(2) && p.engines_copy_reduced(1));
        }
    }

    #[test]
    fn push_rules() {
        let (ar, rs) = (Collective::AllReduce, Collective::ReduceScatter);
        let (node, two, nodes) = (World::test(0, 4, 1), World::test(0, 2, 1), World::test(0, 4, 2));
        let on = GemmRsOptions { push: Some(true), ..Default::default() };
        let off = GemmRsOptions { push: Some(false), ..Default::default() };
        let def = GemmRsOptions::default();
        assert!(pushes(&on, rs, &node, (false, false)).unwrap());
        assert!(pushes(&def, rs, &node, (false, false)).unwrap(), "push by default above two ranks");
        assert!(!pushes(&def, rs, &two, (false, false)).unwrap(), "pull at two");
        assert!(!pushes(&def, rs, &nodes, (false, false)).unwrap(), "pull across nodes");
        assert!(!pushes(&def, ar, &two, (false, false)).unwrap(), "the all-reduce pulls at two");
        assert!(pushes(&def, ar, &node, (false, false)).unwrap(), "and pushes above");
        assert!(!pushes(&off, ar, &node, (false, false)).unwrap(), "the all-reduce may pull on one node");
        assert!(pushes(&def, ar, &nodes, (false, false)).unwrap() && pushes(&def, ar, &two, (true, false)).unwrap());
        for (o, c, w, one_shot) in [(&on, rs, &nodes, false), (&off, ar, &nodes, false), (&off, ar, &two, true)] {
            let e = pushes(o, c, w, (one_shot, false)).unwrap_err().to_string();
            assert!(e.starts_with("invalid argument `push`"), "{e}");
        }
        // A pushed reduce-scatter needs no outbox: half the staging.
        let shape = GemmShape { m: 4000, n: 1544, k: 2048 };
        let (pushed, pulled) = (
            Sizes::of(rs, shape, &node, false, (false, true, false)),
            Sizes::of(rs, shape, &node, false, (false, false, false)),
        );
        assert_eq!(2 * pushed.staging, pulled.staging);
        assert!(GemmRs::heap_bytes(rs, shape, &node, &on) >= pushed.total());
        // Pulled all-reduce partials need the outbox too.
        assert!(GemmRs::heap_bytes(ar, shape, &node, &off) >= pulled.total());
    }

    #[test]
    fn prefetch_rules() {
        let w = World::test(0, 2, 1);
        let on = GemmRsOptions { prefetch: Some(true), ..Default::default() };
        assert!(prefetches(&on, &w, (false, false)).unwrap());
        let def = GemmRsOptions::default();
        assert!(prefetches(&def, &w, (false, false)).unwrap(), "on by default at two ranks");
        assert!(!prefetches(&def, &World::test(0, 4, 1), (false, false)).unwrap(), "off above");
        assert!(!prefetches(&def, &w, (false, true)).unwrap(), "off when pushing");
        for (w, form) in [(&w, (true, false)), (&w, (false, true)), (&World::test(0, 2, 2), (false, false))] {
            let e = prefetches(&on, w, form).unwrap_err().to_string();
            assert!(e.starts_with("invalid argument `prefetch`"), "{e}");
        }
    }

    #[test]
    fn pull_reduced_rules() {
        // The two-phase all-reduce on one node with bf16 output only.
        let (rs, def) = (Collective::ReduceScatter, GemmRsOptions::default());
        let one = World::test(0, 2, 1);
        let pull = GemmRsOptions { pull_reduced: Some(true), ..def.clone() };
        let (big, small) = (GemmShape { m: 16384, n: 4096, k: 8192 }, GemmShape { m: 2048, n: 4096, k: 4096 });
        assert!(pulls_reduced(&pull, Collective::AllReduce, small, &one, (false, false)).unwrap());
        assert!(pulls_reduced(&def, Collective::AllReduce, big, &one, (false, false)).unwrap());
        assert!(!pulls_reduced(&def, Collective::AllReduce, small, &one, (false, false)).unwrap());
        // The thresholds: 32 MiB of partial and K/W = 4096, each on its own.
        let at = |m: usize, k: usize| {
            pulls_reduced(&def, Collective::AllReduce, GemmShape { m, n: 4096, k }, &one, (false, false))
        };
        assert!(at(4096, 8192).unwrap(), "32 MiB, K/W 4096");
        assert!(!at(4096 - 8, 8192).unwrap(), "below 32 MiB");
        assert!(!at(16384, 8192 - 16).unwrap(), "K/W below 4096");
        assert!(!pulls_reduced(&def, Collective::AllReduce, big, &World::test(0, 4, 1), (false, false)).unwrap());
        assert!(!pulls_reduced(&def, rs, big, &one, (false, false)).unwrap(), "not asked, not possible: off");
        for (o, c, w, one_shot) in [
            (pull.clone(), rs, &one, false),
            (pull.clone(), Collective::AllReduce, &World::test(0, 2, 2), false),
            (pull.clone(), Collective::AllReduce, &one, true),
            (GemmRsOptions { out_f32: true, ..pull.clone() }, Collective::AllReduce, &one, false),
        ] {
            assert!(pulls_reduced(&o, c, big, w, (one_shot, false))
                .unwrap_err()
                .to_string()
                .contains("`pull_reduced`"));
        }
    }

    #[test]
    fn one_shot_rules() {
        let (ar, rs) = (Collective::AllReduce, Collective::ReduceScatter);
        let small = GemmShape { m: 1024, n: 4096, k: 4096 };
        let big = GemmShape { m: 2048, n: 4096, k: 4096 };
        let def = GemmRsOptions::default();
        let node = World::test(0, 2, 1);
        assert!(one_shot(&def, ar, small, &node).unwrap(), "small all-reduce: one shot by default");
        assert!(!one_shot(&def, ar, big, &node).unwrap(), "large all-reduce: two phases by default");
        assert!(!one_shot(&def, rs, small, &node).unwrap());
        assert!(!one_shot(&def, ar, small, &World::test(0, 2, 2)).unwrap());
        let on = GemmRsOptions { one_shot: Some(true), ..def.clone() };
        assert!(one_shot(&on, ar, big, &node).unwrap());
        for (c, w) in [(rs, node.clone()), (ar, World::test(0, 2, 2)), (ar, World::test(0, 1, 1))] {
            assert!(one_shot(&on, c, small, &w).unwrap_err().to_string().contains("`one_shot`"));
        }
        // One shot: the inbox holds every source's partial of every tile, not of one block.
        let (one, two) = (
            Sizes::of(ar, small, &node, false, (true, true, false)),
            Sizes::of(ar, small, &node, false, (false, true, false)),
        );
        assert_eq!(one.staging, 2 * two.staging);
        assert!(GemmRs::heap_bytes(ar, small, &node, &def) >= one.total());
    }

    #[test]
    fn heap_bytes_cover_every_allocation() {
        let shape = GemmShape { m: 2000, n: 1544, k: 2048 };
        for (w, nodes) in [(2, 1), (2, 2), (4, 2), (4, 4)] {
            for c in [Collective::ReduceScatter, Collective::AllReduce] {
                let wd = World::test(0, w, nodes);
                let o = GemmRsOptions { one_shot: Some(false), ..Default::default() };
                let s = Sizes::of(c, shape, &wd, false, (false, pushes(&o, c, &wd, (false, false)).unwrap(), false));
                let total = GemmRs::heap_bytes(c, shape, &wd, &o);
                let partials = 2 * shape.m * shape.n * 2;
                assert!(total >= s.out + s.staging + s.flags + partials + s.unfused_flags);
                if nodes > 1 {
                    assert!(total >= partials + 2 * s.nodebuf);
                    assert_eq!(s.nodebuf, (nodes * nodes) as usize * (shape.m / w as usize) * shape.n * 2);
                }
            }
        }
    }
}
