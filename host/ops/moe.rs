//! MoE dispatch + grouped GEMM, expert parallelism's first projection: rank r holds tokens
//! `x_r [T_r, H]`, their routing (`topk_idx [T_r, k]` i32 expert ids, distinct per token;
//! `topk_weight [T_r, k]` f32) and the first projection of its `E/W` experts (`[E/W, H, I]` or
//! `[E/W, I, H]`); expert e lives on rank `e / (E/W)`. Rank r gets, for each local expert e,
//! `Y_e = X_e @ W1_e`, where `X_e` is every token (of every rank) routed to e.
//!
//! **Layout of the result.** [`MoeDispatchGemm::output`] `Y [cap_rows, I]` and
//! [`MoeDispatchGemm::dispatched`] `X [cap_rows, H]` hold one row per (token, expert) pair:
//! local expert e's rows start at `expert_offsets[e]`, a multiple of 128 (the GEMM tile height);
//! within an expert, sources in the order r, r + 1, ..., r - 1 (own tokens first), each source's
//! tokens in token order; the expert's rows are then padded up to the next multiple of 128 (padding
//! rows have unspecified values). [`MoeLayout`] (from [`MoeDispatchGemm::layout`]) gives the
//! counts per (source rank, local expert), the offsets, and for every row its source rank, token,
//! top-k slot and weight: what a combine needs.
//!
//! **How.** ONE persistent launch (`device/src/kernels/moe.rs`): a router CTA scans the routing and
//! sends every destination its counts and a record per token; pull CTAs copy each token row once
//! per destination rank over NVLink into shared memory and write it from there to every expert
//! row it has on that rank; compute CTAs run the GEMM engine over the received rows expert by
//! expert (the order the rows fill in), each tile waiting only until its 128 rows have landed. The
//! unfused path is the same kernel twice: the dispatch alone (the pull CTAs only), then the
//! grouped GEMM alone on every SM the fused launch holds (the same bits). With
//! [`MoeOptions::join`] (the default) the pull CTAs run tiles too once no row is left to move.
//!
//! **Precision.** Each output element is one bf16 x bf16 dot product over H accumulated in fp32
//! by the tensor cores, rounded once to the output type: against an f64 reference,
//! `|y - ref| <= 2^-8 * (|ref| + E) + E` for bf16 output (the first term drops for f32 output), with
//! `E` the accumulation bound of `gemm::reference_row_bounded` (each wgmma step of 16 products
//! held to 17 truncations of 2^-23 of the step's largest magnitude, the running sum included; at
//! most the textbook `H * 2^-23 * sum_k |x_k w_k|`). The dispatched rows are bit copies of the
//! source rows.
//!
//! **Several nodes.** Records and counts for a rank on another node go through the FIFO and the
//! proxy (RDMA writes; the emulated NIC between emulated nodes). A rank's tokens cross to each
//! other node once, to the rank there that shares its local rank (its `rx`), and that node's ranks
//! pull them over NVLink from there, as from a peer on their own node.
//!
//! **World sizes.** Up to [`MOE_MAX_WORLD`] (64) ranks in all, at most [`MAX_LOCAL_RANKS`] (8) per
//! node: 1 x 8, 2 x 8 (the 16 ranks of two 8-GPU nodes), 8 x 8, ...; a typed error beyond
//! ([`check_world`]). The router's state per token does not grow with the world: a token has at
//! most k experts, so at most k destination ranks, and it keeps which of its slots leads each one
//! ([`moe_lead_slots`]), not an entry per rank.
use super::copy_engines::{CopyStep, CopyStream, Span};
use super::gemm::BLayout;
use super::{form_switch, Path, PathChoice};
use crate::abi::*;
use crate::comm::communicator::{Communicator, HeapRegion};
use crate::comm::world::World;
use crate::error::{invalid, DiagBuffers, Error, Result};
use crate::gpu::{kernels, DeviceBuffer, DeviceSlice, Gpu, LaunchConfig, TensorMap};
use half::bf16;
use mkernel_device::kernels_info::gemm::{SIDE_SMEM_BYTES, THREADS, TILE_K, TILE_M, TILE_N};
use std::time::Duration;

/// The sizes every rank must agree on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeShape {
    /// Row length of a token (H, the GEMM's K).
    pub hidden: usize,
    /// Columns of each expert's projection (I, the GEMM's N).
    pub inter: usize,
    /// Experts in all (E), a multiple of the world size.
    pub experts: usize,
    /// Experts per token (k).
    pub top_k: usize,
}

impl MoeShape {
    /// Experts on each rank.
    pub fn local_experts(&self, world: usize) -> usize {
        self.experts / world.max(1)
    }

    /// The rules a shape must follow at world size `world` (typed errors naming the field).
    pub fn validate(&self, world: usize) -> Result<()> {
        let MoeShape { hidden: h, inter: i, experts: e, top_k: k } = *self;
        if e == 0 || !e.is_multiple_of(world) || e > MOE_MAX_EXPERTS as usize {
            return Err(invalid(
                "experts",
                format!("{e} must be a positive multiple of the world size {world}, at most {MOE_MAX_EXPERTS}"),
            ));
        }
        if k == 0 || k > e || k > MOE_MAX_TOP_K as usize {
            let most = MOE_MAX_TOP_K.min(e as u32);
            return Err(invalid("top_k", format!("{k} must be in 1..={most} (at most the experts, {e})")));
        }
        if h == 0 || !h.is_multiple_of(8) {
            return Err(invalid("hidden", format!("{h} must be a positive multiple of 8 (16-byte rows)")));
        }
        if i == 0 || !i.is_multiple_of(8) {
            return Err(invalid("inter", format!("{i} must be a positive multiple of 8 (16-byte rows)")));
        }
        Ok(())
    }
}

/// The world sizes the op takes (typed errors naming the rule): at most [`MOE_MAX_WORLD`] ranks in
/// all (a pull CTA tracks its sources in a 64-bit mask) and [`MAX_LOCAL_RANKS`] per node (the
/// peer tables).
pub fn check_world(world: &World) -> Result<()> {
    let (w, lw) = (world.world_size, world.local_world_size);
    if w > MOE_MAX_WORLD {
        return Err(invalid(
            "world",
            format!("{w} ranks: MoE dispatch takes at most {MOE_MAX_WORLD} ranks in all (e.g. 8 nodes x 8)"),
        ));
    }
    if lw as usize > MAX_LOCAL_RANKS {
        return Err(invalid("world", format!("{lw} ranks per node; MoE dispatch takes at most {MAX_LOCAL_RANKS}")));
    }
    Ok(())
}

/// Whether the copy engines move the tokens between this node's ranks ([`MoeOptions::engines`]):
/// the option where it applies (one node of two or more ranks; else a typed error), else off (not
/// yet measured to pay).
pub fn engines(opts: &MoeOptions, world: &World) -> Result<bool> {
    let possible = world.nodes <= 1 && world.world_size > 1;
    form_switch(("engines", opts.engines, "applies to one node of two or more ranks"), possible, false)
}

/// Tuning knobs; `None` takes the default.
#[derive(Clone, Debug)]
pub struct MoeOptions {
    /// f32 output instead of bf16.
    pub out_f32: bool,
    /// CTAs that route and move rows (the rest compute). Default: the tuned table's for the
    /// nearest measured config ([`super::tuned::moe`]), else 16.
    pub pull_ctas: Option<u32>,
    /// Tokens per `x_heap` copy item (a rank copies its tokens where peers read them). Default 64.
    pub chunk_tokens: u32,
    /// Records per pull item from a source. Default: the tuned table's, else 32.
    pub run_records: Option<u32>,
    /// Rows of the receive buffers. Default: the most a rank can receive (every token of every
    /// rank on this rank's experts, `min(k, E/W)` rows each, plus padding); a smaller capacity
    /// saves memory, and a routing that needs more is a typed error after the launch (nothing is
    /// written).
    pub capacity_rows: Option<usize>,
    /// Fused, or the dispatch then the grouped GEMM (`Auto`: the tuned table's choice, else
    /// fused).
    pub path: PathChoice,
    /// In a fused launch, compute CTAs move rows until their first tile's rows are in (early on
    /// the GEMM would otherwise wait for the pull CTAs). Default on.
    pub compute_helps: bool,
    /// The grouped GEMM reads this rank's own tokens where they are (its producer gathers rows
    /// by index) instead of the dispatch laying them out once per expert; `dispatched()` then
    /// holds only the other ranks' rows. Default off.
    pub gather: bool,
    /// In a fused launch the pull CTAs run tiles once no row is left to move, every CTA drawing
    /// its next tile from a counter (`MOE_JOIN`). Default (`None`): the tuned table's choice for
    /// the nearest measured config ([`super::tuned::moe`]; lines measured before the option
    /// say off), else on.
    pub join: Option<bool>,
    /// One node: the copy engines copy this rank's tokens into every local peer's `rx` once
    /// the launch says the peers are done with the last ones (a stream of this op's, forked from
    /// the caller's and joined back), and the pull CTAs read a peer's rows from their own GPU's
    /// memory instead of over NVLink; nobody copies into `x_heap` (`MOE_ENGINES`). Every token
    /// crosses, routed there or not. Ranks sharing one GPU need a fused launch that leaves an SM
    /// free (their copy is the driver's copy kernel). Default (`None`): [`engines`]' rule.
    pub engines: Option<bool>,
    /// Pull items take every run of this rank's own records first, then the peers' in turn
    /// (`MOE_OWN_FIRST`), instead of one run of each source in turn. Default: with the copy
    /// engines (a peer's rows are readable only once its whole `x` landed).
    pub own_first: Option<bool>,
    /// The spare warps of every CTA running tiles move rows beside them (`MOE_SIDE_PULL`): one
    /// SM writes about 45 GB/s however it stores, and a compute CTA's SM writes almost nothing
    /// while it multiplies. The laid-out form only (not with [`MoeOptions::gather`]). Default
    /// off.
    pub side_pull: bool,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for MoeOptions {
    fn default() -> Self {
        Self {
            out_f32: false,
            pull_ctas: None,
            chunk_tokens: 64,
            run_records: None,
            capacity_rows: None,
            path: PathChoice::Auto,
            compute_helps: true,
            gather: false,
            join: None,
            engines: None,
            own_first: None,
            side_pull: false,
            timeout: Duration::from_secs(10),
        }
    }
}

/// What one launch received: counts, offsets and the row table (see the module docs).
#[derive(Clone, Debug, PartialEq)]
pub struct MoeLayout {
    /// `[world][local_experts]`: rows source rank s sent local expert e.
    pub recv_counts: Vec<u32>,
    /// `[local_experts + 1]`: first row of each local expert (multiples of 128); the last entry
    /// is the rows used.
    pub expert_offsets: Vec<u32>,
    /// `[local_experts]`: rows each local expert received (padding excluded).
    pub expert_rows: Vec<u32>,
    /// One entry per row used (`expert_offsets[local_experts]` of them).
    pub rows: Vec<MoeRow>,
}

/// A bound MoE dispatch + grouped GEMM (see the module docs).
pub struct MoeDispatchGemm<'a> {
    comm: &'a Communicator,
    shape: MoeShape,
    tokens: usize,
    max_tokens: usize,
    path: Path,
    out_f32: bool,
    _x_heap: HeapRegion<'a>,
    _inbox: HeapRegion<'a>,
    _flags: HeapRegion<'a>,
    _outbox: HeapRegion<'a>,
    _rx: HeapRegion<'a>,
    _peers: DeviceBuffer<MoePeers>,
    xe: DeviceBuffer<bf16>,
    y: DeviceBuffer<u8>,
    rows: DeviceBuffer<MoeRow>,
    scratch: DeviceBuffer<u32>,
    errors: DeviceBuffer<u32>,
    _launches: DeviceBuffer<u64>,
    _maps: DeviceBuffer<TensorMap>,
    diag: DiagBuffers,
    params: MoeParams,
    kernel: kernels::Kernel<MoeParams>,
    engines: Option<Engines>,
}

/// The copy engines' side of a launch that pulls ([`MoeOptions::engines`], the handshake on
/// `MOE_ENGINES`): one step, behind this launch's `engine_go`, copying the tokens into each
/// other rank's `rx` (none without tokens), then a word of 1 into its `engine_in[me]`.
struct Engines {
    /// A device word holding 1: the source of every `engine_in` copy.
    _one: DeviceBuffer<u32>,
    stream: CopyStream,
}

impl Engines {
    /// Plan the copies: `p.x` (the caller's tokens) into the peers' `rx` and `flags` (local rank
    /// index) as mapped here, behind `flags` (this rank's) `engine_go`.
    fn new(gpu: &Gpu, p: &MoeParams, table: &MoePeers, flags: u64) -> Result<Engines> {
        let one = gpu.upload(&[1u32])?;
        let (me, lw) = (p.local_rank, p.local_world);
        let bytes = p.tokens as usize * p.row_bytes() as usize;
        // To the previous rank first: a rank pulls its sources in the order me, me + 1, ...,
        // so each rank's first peer source is the one that copies to it first.
        let copies = (1..lw)
            .map(|off| {
                let d = ((me + lw - off) % lw) as usize;
                let tokens = Span { dst: table.rx[d] + p.rx_at(p.rank), src: p.x, bytes };
                let arrived =
                    Span { dst: table.flags[d] + 4 * p.engine_in_flag(p.rank) as u64, src: one.addr(), bytes: 4 };
                (tokens, arrived)
            })
            .collect();
        let go = CopyStep { counter: flags + 4 * p.engine_go_flag() as u64, target: 1, copies };
        Ok(Engines { _one: one, stream: CopyStream::new(gpu, vec![go])? })
    }
}

impl<'a> MoeDispatchGemm<'a> {
    /// Collective: validate (typed errors name the argument and the rule), agree on the shape
    /// across ranks, allocate the receive buffers and the heap regions peers read or write,
    /// encode the tensor maps. This rank's `x` is `[tokens, H]` bf16, `topk_idx` / `topk_weight`
    /// `[tokens, k]`, `w1` its `E/W` experts' weights in `b_layout` (`KN`: `[E/W, H, I]`, `NK`:
    /// `[E/W, I, H]`). Ranks may hold different numbers of tokens.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &'a Communicator,
        gpu: &Gpu,
        shape: MoeShape,
        b_layout: BLayout,
        x: impl Into<DeviceSlice<'a, bf16>>,
        topk_idx: impl Into<DeviceSlice<'a, i32>>,
        topk_weight: impl Into<DeviceSlice<'a, f32>>,
        w1: impl Into<DeviceSlice<'a, bf16>>,
        tokens: usize,
        opts: MoeOptions,
    ) -> Result<Self> {
        let world = comm.world().clone();
        let (x, idx, wt, w1) = (x.into(), topk_idx.into(), topk_weight.into(), w1.into());
        let w = world.world_size as usize;
        let MoeShape { hidden: h, inter: i, experts: e, top_k: k } = shape;
        check_world(&world)?;
        shape.validate(w)?;
        let el = e / w;
        let need = |arg: &'static str, len: usize, want: usize, what: &str| {
            if len < want {
                Err(invalid(arg, format!("holds {len} elements; {what} needs {want}")))
            } else {
                Ok(())
            }
        };
        // The router indexes the routing `[tokens, top_k]` in 32 bits.
        if (tokens as u64).saturating_mul(k as u64) > u32::MAX as u64 {
            return Err(invalid(
                "tokens",
                format!("{tokens} tokens x top_k {k} must fit in 32 bits (the routing is indexed in u32)"),
            ));
        }
        need("x", x.len(), tokens * h, &format!("[tokens {tokens}, hidden {h}]"))?;
        need("topk_idx", idx.len(), tokens * k, &format!("[tokens {tokens}, top_k {k}]"))?;
        need("topk_weight", wt.len(), tokens * k, &format!("[tokens {tokens}, top_k {k}]"))?;
        need("w1", w1.len(), el * h * i, &format!("{el} local experts of [{h} x {i}]"))?;
        super::check_aligned16("x", x.addr(), "rows move by bulk copies")?;
        super::check_aligned16("w1", w1.addr(), "TMA loads it")?;
        let tuned = super::tuned::moe([tokens, h, i, e, k], &world);
        let run_records = opts.run_records.or(tuned.map(|t| t.run_records)).unwrap_or(32);
        if opts.chunk_tokens == 0 {
            return Err(invalid("chunk_tokens", "must be at least 1"));
        }
        if run_records == 0 {
            return Err(invalid("run_records", "must be at least 1"));
        }
        let pull = opts.pull_ctas.or(tuned.map(|t| t.pull_ctas)).unwrap_or(16);
        let sms = gpu.info().sm_count;
        if pull == 0 || pull >= sms {
            return Err(invalid(
                "pull_ctas",
                format!("{pull} must be in 1..{sms} (the rest of the {sms} SMs compute)"),
            ));
        }
        // The tuned line's choice where one applies (lines from before the option say off),
        // else on.
        let join = opts.join.unwrap_or(tuned.is_none_or(|t| t.join));
        if opts.side_pull && opts.gather {
            return Err(invalid(
                "side_pull",
                "the gathering producer (gather) uses every producer thread: no spare warps move rows beside it",
            ));
        }
        let engines = engines(&opts, &world)?;
        let own_first = opts.own_first.unwrap_or(engines);
        let path = match opts.path {
            PathChoice::Unfused => Path::Unfused,
            PathChoice::Fused => Path::Fused,
            PathChoice::Auto => tuned.map(|t| t.path).unwrap_or(Path::Fused),
        };
        comm.agree(
            "shape",
            &format!(
                "moe H {h} I {i} E {e} k {k} {b_layout:?} {} out, {} pull CTAs, chunk {} run {}, {}, engines {engines}, own first {own_first}, side pull {}",
                if opts.out_f32 { "f32" } else { "bf16" },
                pull,
                opts.chunk_tokens,
                run_records,
                path.name(),
                opts.side_pull
            ),
        )?;
        // Every rank's token count: the largest sizes x_heap and the inboxes.
        let all = comm.bootstrap().all_gather(&(tokens as u64).to_le_bytes())?;
        let max_tokens =
            all.iter().map(|b| u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8]))).max().unwrap_or(0) as usize;
        let max_tokens = max_tokens.max(1);
        let worst = (w * max_tokens * k.min(el)).div_ceil(TILE_M as usize) * TILE_M as usize + el * TILE_M as usize;
        let cap = opts.capacity_rows.unwrap_or(worst).div_ceil(TILE_M as usize) * TILE_M as usize;
        if cap == 0 || cap > u32::MAX as usize / 2 {
            return Err(invalid("capacity_rows", format!("{cap} rows: must be positive and below 2^31")));
        }

        let (w32, el32, k32, mt32) = (w as u32, el as u32, k as u32, max_tokens as u32);
        let inbox_bytes = MoeParams::inbox_bytes(w32, mt32, el32, k32) as usize;
        // With the copy engines nobody reads x_heap (they copy from x).
        let x_heap = comm.alloc(if engines { 1 } else { max_tokens * h * 2 })?;
        let inbox = comm.alloc(inbox_bytes)?;
        let flags = comm.alloc(4 * MoeParams::flag_words(w32) as usize)?;
        // The outbox is a FIFO source (heap); rx receives other nodes' tokens (with the copy
        // engines, this node's).
        let outbox = comm.alloc(inbox_bytes)?;
        let rx = comm.alloc(if world.nodes > 1 || engines { w * max_tokens * h * 2 } else { 1 })?;
        let mut table = MoePeers::default();
        for d in 0..world.local_world_size {
            let r = world.local_to_global(d);
            let missing = || invalid("world", format!("rank {r}'s heap is not mapped here"));
            table.x_heap[d as usize] = x_heap.peer(r).ok_or_else(missing)?;
            table.inbox[d as usize] = inbox.peer(r).ok_or_else(missing)?;
            table.flags[d as usize] = flags.peer(r).ok_or_else(missing)?;
            table.rx[d as usize] = rx.peer(r).ok_or_else(missing)?;
        }
        let peers = gpu.upload(&[table])?;
        let es = if opts.out_f32 { 4 } else { 2 };
        let xe = gpu.alloc::<bf16>(cap * h)?;
        let y = gpu.alloc::<u8>(cap * i * es)?;
        let rows = gpu.alloc::<MoeRow>(cap)?;
        let layout = MoeScratch::new(el32, w32, cap as u32, pull);
        let scratch = gpu.upload(&vec![0u32; layout.words as usize])?;
        let errors = gpu.upload(&[0u32; 4])?;
        let launches = gpu.upload(&[0u64])?;
        let diag = DiagBuffers::new(gpu, opts.timeout)?;

        let map = super::gemm::bf16_sw128;
        let (h64, i64_, cap64, el64) = (h as u64, i as u64, cap as u64, el as u64);
        let a_map = map(xe.addr(), [h64, cap64], 2 * h64, [TILE_K, TILE_M]);
        let b_map = match b_layout {
            BLayout::KN => map(w1.addr(), [i64_, el64 * h64], 2 * i64_, [64, TILE_K]),
            BLayout::NK => map(w1.addr(), [h64, el64 * i64_], 2 * h64, [TILE_K, TILE_N]),
        };
        let c_map = map(y.addr(), [i64_, cap64], es as u64 * i64_, [64, 64]);
        let maps = gpu.upload_tensor_maps(&[a_map, b_map, c_map])?;
        let gemm = GemmParams {
            a_map: maps.addr(),
            b_map: maps.addr() + 128,
            c_map: maps.addr() + 256,
            c: y.addr(),
            diag: diag.abi(),
            timeout_ns: opts.timeout.as_nanos().min(u64::MAX as u128) as u64,
            m: cap as u32,
            n: i as u32,
            k: h as u32,
            b_layout: b_layout.pick(B_KN, B_NK),
            out_f32: opts.out_f32 as u32,
            group_m: 1,
            // Every CTA must be resident at once (compute waits on the pull CTAs), and no more
            // compute CTAs than the most tiles a layout can have.
            roles: RoleSplit {
                compute: (sms - pull).min(((cap / TILE_M as usize) * i.div_ceil(TILE_N as usize)) as u32),
                intra_comm: pull,
                inter_send: 0,
                inter_reduce: 0,
            },
        };
        let params = MoeParams {
            gemm,
            x: x.addr(),
            topk_idx: idx.addr(),
            topk_weight: wt.addr(),
            peers: peers.addr(),
            outbox: outbox.addr(),
            xe: xe.addr(),
            rows: rows.addr(),
            scratch: scratch.addr(),
            errors: errors.addr(),
            launches: launches.addr(),
            fifo: comm.fifo_params(),
            outbox_off: outbox.offset(),
            inbox_off: inbox.offset(),
            flags_off: flags.offset(),
            x_heap_off: x_heap.offset(),
            rx_off: rx.offset(),
            tokens: tokens as u32,
            max_tokens: mt32,
            hidden: h as u32,
            experts: e as u32,
            local_experts: el32,
            top_k: k32,
            rank: world.rank,
            world: w32,
            local_rank: world.local_rank,
            local_world: world.local_world_size,
            chunk_tokens: opts.chunk_tokens,
            run_records,
            cap_rows: cap as u32,
            b_rows_per_expert: b_layout.pick(h, i) as u32,
            mode: MOE_FUSED,
            flags: if opts.compute_helps { MOE_COMPUTE_HELPS } else { 0 }
                | if opts.gather { MOE_GATHER } else { 0 }
                | if join { MOE_JOIN } else { 0 }
                | if engines { MOE_ENGINES } else { 0 }
                | if own_first { MOE_OWN_FIRST } else { 0 }
                | if opts.side_pull { MOE_SIDE_PULL } else { 0 },
        };
        let shared = (0..world.local_world_size).any(|d| comm.shares_gpu(world.local_to_global(d)));
        let ctas = params.gemm.roles.total();
        if engines && shared && ctas >= sms {
            return Err(invalid(
                "engines",
                format!(
                    "between ranks sharing one GPU the copy is the driver's copy kernel, which needs an SM the fused \
                     launch leaves free ({ctas} CTAs on {sms} SMs): give each rank its own GPU, or a smaller shape"
                ),
            ));
        }
        let engines = if engines { Some(Engines::new(gpu, &params, &table, flags.addr())?) } else { None };
        let kernel = match opts.gather {
            false => b_layout.pick(kernels::MOE_KN, kernels::MOE_NK),
            true => b_layout.pick(kernels::MOE_GATHER_KN, kernels::MOE_GATHER_NK),
        };
        comm.barrier()?;
        Ok(MoeDispatchGemm {
            comm,
            shape,
            tokens,
            max_tokens,
            path,
            out_f32: opts.out_f32,
            _x_heap: x_heap,
            _inbox: inbox,
            _flags: flags,
            _outbox: outbox,
            _rx: rx,
            _peers: peers,
            xe,
            y,
            rows,
            scratch,
            errors,
            _launches: launches,
            _maps: maps,
            diag,
            params,
            kernel,
            engines,
        })
    }

    /// The shape.
    pub fn shape(&self) -> MoeShape {
        self.shape
    }

    /// Tokens this rank holds, and the most any rank holds.
    pub fn tokens(&self) -> (usize, usize) {
        (self.tokens, self.max_tokens)
    }

    /// Rows of the receive buffers.
    pub fn capacity_rows(&self) -> usize {
        self.params.cap_rows as usize
    }

    /// Records per pull item.
    pub fn run_records(&self) -> u32 {
        self.params.run_records
    }

    /// Whether compute CTAs move rows before their first tiles ([`MoeOptions::compute_helps`]).
    pub fn compute_helps(&self) -> bool {
        self.params.flags & MOE_COMPUTE_HELPS != 0
    }

    /// Whether the pull CTAs run tiles after the pull ([`MoeOptions::join`]).
    pub fn join(&self) -> bool {
        self.params.flags & MOE_JOIN != 0
    }

    /// Whether pull items take this rank's own runs first ([`MoeOptions::own_first`]).
    pub fn own_first(&self) -> bool {
        self.params.flags & MOE_OWN_FIRST != 0
    }

    /// Whether the spare warps of the CTAs running tiles move rows ([`MoeOptions::side_pull`]).
    pub fn side_pull(&self) -> bool {
        self.params.flags & MOE_SIDE_PULL != 0
    }

    /// Whether the copy engines move the tokens between this node's ranks
    /// ([`MoeOptions::engines`]).
    pub fn engines(&self) -> bool {
        self.engines.is_some()
    }

    /// The CTA roles of a fused launch.
    pub fn roles(&self) -> RoleSplit {
        self.params.gemm.roles
    }

    /// The path [`MoeDispatchGemm::launch`] runs.
    pub fn path(&self) -> Path {
        self.path
    }

    /// `Y [capacity_rows, I]` (bf16, or f32 when asked for), rows as [`MoeDispatchGemm::layout`]
    /// says; valid after a launch completes, until the next one starts.
    pub fn output_bytes(&self) -> DeviceSlice<'_, u8> {
        self.y.as_slice()
    }

    /// The output as bf16 (bf16 output only).
    pub fn output(&self) -> Option<DeviceSlice<'_, bf16>> {
        // SAFETY: y is a live device allocation of this op, 256-byte aligned, borrowed with self.
        (!self.out_f32).then(|| unsafe { DeviceSlice::from_raw(self.y.addr(), self.y.len() / 2) })
    }

    /// The output as f32 (f32 output only).
    pub fn output_f32(&self) -> Option<DeviceSlice<'_, f32>> {
        // SAFETY: as for `output`.
        self.out_f32.then(|| unsafe { DeviceSlice::from_raw(self.y.addr(), self.y.len() / 4) })
    }

    /// The dispatched token rows `[capacity_rows, H]`, in the output's row order.
    pub fn dispatched(&self) -> DeviceSlice<'_, bf16> {
        self.xe.as_slice()
    }

    /// Where this op's scratch words lie (the layout the kernel computes them with).
    fn scratch_layout(&self) -> MoeScratch {
        let p = &self.params;
        MoeScratch::new(p.local_experts, p.world, p.cap_rows, p.gemm.roles.intra_comm)
    }

    /// Where a launch leaves its layout on the device (what [`MoeDispatchGemm::layout`]
    /// downloads): the per-expert words (row offsets, rows, tile prefix, then the per-source
    /// counts) and the row table (`capacity_rows` entries, those past the rows used unspecified).
    pub fn layout_tables(&self) -> (DeviceSlice<'_, u32>, DeviceSlice<'_, MoeRow>) {
        let p = &self.params;
        let l = self.scratch_layout();
        let end = l.recv_counts + p.world * p.local_experts;
        (self.scratch.slice(l.expert_off as usize..end as usize), self.rows.as_slice())
    }

    /// What the last completed launch received (downloads the tables; call after
    /// [`MoeDispatchGemm::wait`]).
    pub fn layout(&self) -> Result<MoeLayout> {
        let l = self.scratch_layout();
        let (words, table) = self.layout_tables();
        let words = words.to_vec()?;
        let el = self.params.local_experts as usize;
        let w = self.params.world as usize;
        // `words` starts at the expert offsets.
        let at = |off: u32, n: usize| words[(off - l.expert_off) as usize..][..n].to_vec();
        let expert_offsets = at(l.expert_off, el + 1);
        let used = (expert_offsets[el] as usize).min(self.params.cap_rows as usize);
        let rows = table.to_vec()?;
        Ok(MoeLayout {
            recv_counts: at(l.recv_counts, w * el),
            expert_rows: at(l.expert_rows, el),
            expert_offsets,
            rows: rows[..used].to_vec(),
        })
    }

    fn launch_mode(&self, gpu: &Gpu, mode: u32) -> Result<()> {
        let mut p = self.params;
        p.mode = mode;
        match mode {
            MOE_DISPATCH_ONLY => p.gemm.roles.compute = 0,
            MOE_GEMM_ONLY => {
                // The grouped GEMM alone (the unfused path's, and the bench's "alone") runs on
                // every SM the fused launch holds, as a GEMM launched on its own would.
                p.gemm.roles.compute += p.gemm.roles.intra_comm;
                p.gemm.roles.intra_comm = 0;
            }
            _ => {}
        }
        let cfg = LaunchConfig::linear(p.gemm.roles.total(), THREADS, SIDE_SMEM_BYTES);
        let launch = || -> Result<()> {
            // SAFETY: every address in params belongs to buffers this op owns or borrows for 'a
            // (peers' heaps stay mapped while the communicator lives).
            unsafe { gpu.launch(self.kernel, &cfg, &p)? };
            Ok(())
        };
        match &self.engines {
            // Every launch that pulls (not the grouped GEMM alone) takes its peers' tokens from
            // its rx, so each is one round of the copy engines' handshake.
            Some(e) if mode != MOE_GEMM_ONLY => {
                // An earlier report leaves the abort word set: refuse before enqueueing anything.
                self.diag.check()?;
                // SAFETY: `engine_go` is this op's flag word; the spans lie in the caller's `x`
                // (borrowed for the op's life), this op's `one` and the peers' rx and flags
                // (mapped while the communicator lives); the launch raises `engine_go` whatever
                // its bounded waits do.
                unsafe { e.stream.around(gpu, launch) }
            }
            _ => launch(),
        }
    }

    /// Enqueue one call through [`MoeDispatchGemm::path`] (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        self.launch_path(gpu, self.path)
    }

    /// Enqueue one call through `path`.
    pub fn launch_path(&self, gpu: &Gpu, path: Path) -> Result<()> {
        match path {
            Path::Fused => self.launch_mode(gpu, MOE_FUSED),
            Path::Unfused => {
                self.launch_dispatch_only(gpu)?;
                self.launch_gemm_only(gpu)
            }
        }
    }

    /// The dispatch alone: rows and layout, no GEMM (a collective, like the fused launch).
    pub fn launch_dispatch_only(&self, gpu: &Gpu) -> Result<()> {
        self.launch_mode(gpu, MOE_DISPATCH_ONLY)
    }

    /// The grouped GEMM alone, over the rows and layout the last dispatch left (local).
    pub fn launch_gemm_only(&self, gpu: &Gpu) -> Result<()> {
        self.launch_mode(gpu, MOE_GEMM_ONLY)
    }

    /// Wait for this rank's launches; report a device-side timeout or a routing error.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        self.diag.wait(gpu, "moe", || self.comm.check())?;
        let err = self.errors.to_vec()?;
        if err[0] != 0 {
            self.errors.copy_from(&[0; 4])?;
            let what = match err[0] {
                MOE_ERR_BAD_EXPERT => format!(
                    "topk_idx[{}][{}] = {} is not an expert id (0..{}); that entry was not dispatched",
                    err[1], err[2], err[3] as i32, self.shape.experts
                ),
                MOE_ERR_DUP_EXPERT => format!(
                    "topk_idx[{}][{}] = {} repeats an earlier slot of the token (experts must be distinct); not dispatched twice",
                    err[1], err[2], err[3]
                ),
                MOE_ERR_CAPACITY => format!(
                    "the routing needs {} receive rows on rank {}, above capacity_rows {}; nothing was received",
                    err[1], self.params.rank, err[2]
                ),
                c => format!("unknown error code {c}"),
            };
            return Err(Error::DeviceInput { op: "moe", what });
        }
        Ok(())
    }

    /// Launch and wait.
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.wait(gpu)
    }
}

impl super::TwoPathOp for MoeDispatchGemm<'_> {
    fn launch_path(&self, gpu: &Gpu, path: Path) -> Result<()> {
        MoeDispatchGemm::launch_path(self, gpu, path)
    }

    fn wait(&self, gpu: &Gpu) -> Result<()> {
        MoeDispatchGemm::wait(self, gpu)
    }
}

/// The host reference of one rank's receive layout, for tests: from every rank's routing
/// (`topk[s]` is rank s's `[T_s, k]` expert ids), the rows rank `rank` receives, in the documented
/// order: `(local expert, source rank, token, slot)` per row, expert by expert.
pub fn reference_rows(
    topk: &[Vec<i32>],
    top_k: usize,
    experts: usize,
    rank: usize,
) -> Vec<(usize, usize, usize, usize)> {
    let w = topk.len();
    let el = experts / w;
    let mut out = Vec::new();
    for le in 0..el {
        let e = rank * el + le;
        for q in 0..w {
            let s = (rank + q) % w;
            for (t, row) in topk[s].chunks(top_k).enumerate() {
                if let Some(j) = row.iter().position(|&x| x == e as i32) {
                    out.push((le, s, t, j));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(hidden: usize, inter: usize, experts: usize, top_k: usize) -> MoeShape {
        MoeShape { hidden, inter, experts, top_k }
    }

    #[test]
    fn bad_shapes_name_their_field_and_rule() {
        let arg = |r: Result<()>| match r {
            Err(Error::InvalidArgument { arg, rule }) => (arg, rule),
            other => panic!("expected a typed error, got {other:?}"),
        };
        assert!(shape(7168, 2048, 256, 8).validate(2).is_ok());
        assert!(shape(8, 8, 3, 3).validate(3).is_ok());
        let (a, r) = arg(shape(64, 64, 6, 2).validate(4));
        assert_eq!(a, "experts");
        assert!(r.contains("multiple of the world size 4"), "{r}");
        assert_eq!(arg(shape(64, 64, 0, 1).validate(1)).0, "experts");
        assert_eq!(arg(shape(64, 64, 2048, 2).validate(2)).0, "experts");
        assert_eq!(arg(shape(64, 64, 8, 0).validate(2)).0, "top_k");
        assert_eq!(arg(shape(64, 64, 8, 9).validate(2)).0, "top_k");
        assert_eq!(arg(shape(64, 64, 64, 17).validate(2)).0, "top_k");
        assert_eq!(arg(shape(100, 64, 8, 2).validate(2)).0, "hidden");
        assert_eq!(arg(shape(64, 0, 8, 2).validate(2)).0, "inter");
    }

    #[test]
    fn copy_engines_take_one_node_of_two_or_more_ranks() {
        let on = MoeOptions { engines: Some(true), ..Default::default() };
        let def = MoeOptions::default();
        let (two, four) = (World::test(0, 2, 1), World::test(3, 4, 1));
        assert!(engines(&on, &two).unwrap() && engines(&on, &four).unwrap());
        assert!(!engines(&def, &two).unwrap(), "off by default (not measured)");
        for w in [World::test(0, 1, 1), World::test(1, 2, 2), World::test(2, 4, 2)] {
            let e = engines(&on, &w).unwrap_err().to_string();
            assert!(e.starts_with("invalid argument `engines`") && e.contains("one node of two or more"), "{e}");
            assert!(!engines(&def, &w).unwrap());
        }
    }

    #[test]
    fn reference_layout_is_expert_then_source_from_self_then_token() {
        // Two ranks, 4 experts (2 each), top-2.
        let topk = vec![vec![0, 2, 1, 0, 3, 2], vec![2, 0, 0, 3]];
        let rows = reference_rows(&topk, 2, 4, 1);
        // Rank 1 holds experts 2 and 3: expert 2 (local 0) from rank 1 first, then rank 0.
        assert_eq!(rows, vec![(0, 1, 0, 0), (0, 0, 0, 1), (0, 0, 2, 1), (1, 1, 1, 1), (1, 0, 2, 0)]);
        let rows0 = reference_rows(&topk, 2, 4, 0);
        assert_eq!(rows0, vec![(0, 0, 0, 0), (0, 0, 1, 1), (0, 1, 0, 1), (0, 1, 1, 0), (1, 0, 1, 0)]);
    }
}
