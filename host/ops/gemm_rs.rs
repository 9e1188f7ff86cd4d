//! GEMM + ReduceScatter and GEMM + AllReduce, tensor parallelism's second projection: rank r
//! holds `A_r[M, K/W]` and `B_r` (`[K/W, N]` or `[N, K/W]`); the sum over ranks of `A_r @ B_r`
//! is scattered by row blocks (rank r gets rows `r * M/W ..`) or, all-reduce, given whole to
//! every rank.
//!
//! The fused path is ONE persistent launch (`device/src/kernels/gemm_rs.rs`): each rank computes
//! the tiles of the other ranks' row blocks first and hands each, rounded to bf16, to its owner as
//! soon as its epilogue has it (reduce-scatter: the owner pulls it from this rank's outbox over
//! NVLink; all-reduce: it is pushed into the owner's inbox); the owner computes its own block
//! last and adds what arrived. Helper threads in the producer warpgroup do all the waiting and
//! copying, so the tensor cores never wait on NVLink. The unfused path (our GEMM into a partial
//! buffer, then a pull-and-sum kernel) is the reference: the same sums in the same order, the
//! same bits.
//!
//! **Precision contract.** Products accumulate in fp32; each rank's partial is rounded to bf16
//! once; the partials are added in fp32 (the owner's first, then the others in rank order) and the
//! sum rounded once to the output type. Per element, with `P_s` the exact partials and `u =
//! 2^-8` (bf16 rounding, relative):
//! `|out - sum_s P_s| <= u/2 * (sum_s |P_s| + |out|) + W * 2^-24 * sum_s |P_s|` (fp32 adds), and
//! for f32 output the last term of `u/2` drops. The tests hold every rank's result to this
//! bound against an f64 host reference on sampled rows.
//!
//! One node for now: ranks on other nodes are a typed error (the inter-node reduce, through the
//! FIFO and proxy, is not written yet).
use super::gemm::{BLayout, CAddr, Gemm, GemmOptions, GemmShape};
use super::{Path, PathChoice};
use crate::abi::{GemmRsParams, PeerTable, ReduceParams, RoleSplit, FLAG_STRIDE, MAX_LOCAL_RANKS};
use crate::comm::communicator::{Communicator, HeapRegion};
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
#[derive(Clone, Debug)]
pub struct GemmRsOptions {
    /// f32 output instead of bf16.
    pub out_f32: bool,
    /// Fused, unfused, or chosen per shape (fused unless told otherwise: no tuned table yet).
    pub path: PathChoice,
    /// Tile rows walked together within an owner block (L2 reuse).
    pub group_m: u32,
    /// Rounds of sends before this rank's first own tile (`sched::OwnerTiles`): an own tile
    /// waits for the others' partials of it, sent `lead` tiles or more before it, and the sends
    /// spread over the launch once own tiles begin. None: every send first (measured on 2 x H200:
    /// spreading the sends gained nothing for the reduce-scatter and cost the all-reduce 6%).
    pub lead: Option<u32>,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for GemmRsOptions {
    fn default() -> Self {
        Self { out_f32: false, path: PathChoice::Auto, group_m: 8, lead: None, timeout: Duration::from_secs(10) }
    }
}

/// The unfused path: per call parity, a plain GEMM into that parity's partial buffer, and the
/// pull-and-sum kernel reading every rank's buffer of the same parity (two buffers, so a rank
/// that runs ahead never overwrites a partial another rank still reads).
struct Unfused<'a> {
    gemms: [Gemm<'a>; 2],
    reduce: [ReduceParams; 2],
    _partials: [HeapRegion<'a>; 2],
    _flags: HeapRegion<'a>,
    _launches: DeviceBuffer<u64>,
    diag: DiagBuffers,
    calls: Cell<u64>,
}

/// A bound GEMM + ReduceScatter / AllReduce (see the module docs).
pub struct GemmRs<'a> {
    comm: &'a Communicator,
    shape: GemmShape,
    collective: Collective,
    path: Path,
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
        if world.nodes > 1 {
            return Err(invalid(
                "world",
                format!("{} nodes: GEMM + {collective:?} runs inside one node for now (the inter-node reduce is not written)", world.nodes),
            ));
        }
        if w > MAX_LOCAL_RANKS {
            return Err(invalid("world", format!("{w} ranks on a node; at most {MAX_LOCAL_RANKS}")));
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
        let path = match opts.path {
            PathChoice::Unfused => Path::Unfused,
            PathChoice::Fused | PathChoice::Auto => Path::Fused,
        };
        comm.agree(
            "shape",
            &format!(
                "{} {}x{}x{} {b_layout:?} {} out, {}",
                collective.op_name(),
                shape.m,
                shape.n,
                shape.k,
                if opts.out_f32 { "f32" } else { "bf16" },
                path.name()
            ),
        )?;

        let rows = shape.m / w;
        let es = if opts.out_f32 { 4 } else { 2 };
        let out_rows = if collective == Collective::AllReduce { shape.m } else { rows };
        let out = comm.alloc(out_rows * shape.n * es)?;
        let per_owner = GemmRsParams::per_owner(rows as u32, shape.n as u32);
        let pulls = GemmRsParams::owners_pull(collective == Collective::AllReduce);
        let staging = comm.alloc(GemmRsParams::staging_bytes(w as u32, per_owner, pulls) as usize)?;
        let flags = comm.alloc(4 * GemmRsParams::flag_words(w as u32, per_owner) as usize)?;
        // Where my row block starts in each local rank's output.
        let block = |d: u32| -> Result<u64> {
            let base = out.peer(d).ok_or_else(|| invalid("world", format!("rank {d}'s heap is not mapped here")))?;
            Ok(if collective == Collective::AllReduce {
                base + (world.rank as usize * rows * shape.n * es) as u64
            } else {
                base
            })
        };
        let mut table = PeerTable::default();
        let mut out_maps = vec![<TensorMap as bytemuck::Zeroable>::zeroed(); MAX_LOCAL_RANKS];
        for d in 0..world.local_world_size {
            let r = world.local_to_global(d);
            let missing = || invalid("world", format!("rank {r}'s heap is not mapped here"));
            table.staging[d as usize] = staging.peer(r).ok_or_else(missing)?;
            table.flags[d as usize] = flags.peer(r).ok_or_else(missing)?;
            table.out[d as usize] = block(r)?;
            if !opts.out_f32 {
                let dims = [shape.n as u64, rows as u64];
                out_maps[d as usize] =
                    super::gemm::bf16_sw128(table.out[d as usize], dims, 2 * shape.n as u64, [64, 64]).encode()?;
            }
        }
        let peers = gpu.upload(&[table])?;
        let out_maps_buf = gpu.upload(&out_maps)?;
        let launches = gpu.upload(&[0u64])?;
        let diag = DiagBuffers::new(gpu)?;
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
        let tiles = w as u32 * per_owner;
        gemm.roles = RoleSplit::compute_only(gpu.info().sm_count.min(tiles));
        let params = GemmRsParams {
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
            lead: opts.lead.unwrap_or(u32::MAX).min(per_owner),
            _pad: 0,
        };
        let kernel = if b_layout == BLayout::KN { kernels::GEMM_RS_KN } else { kernels::GEMM_RS_NK };
        let unfused = Self::unfused(comm, gpu, collective, local, b_layout, (a.addr(), b.addr()), &out, &opts)?;
        comm.barrier()?;
        Ok(GemmRs {
            comm,
            shape,
            collective,
            path,
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
        let partials = [comm.alloc(local.m * local.n * 2)?, comm.alloc(local.m * local.n * 2)?];
        let flags = comm.alloc(4 * (w * FLAG_STRIDE) as usize)?;
        let launches = gpu.upload(&[0u64])?;
        let diag = DiagBuffers::new(gpu)?;
        let gemm = |p: &HeapRegion<'a>| {
            let gopts = GemmOptions { ctas: None, group_m: opts.group_m, timeout: opts.timeout, ..Default::default() }
                .whole_tiles();
            Gemm::at(gpu, local, b_layout, (a, b), CAddr { addr: p.addr(), f32: false }, gopts)
        };
        let gemms = [gemm(&partials[0])?, gemm(&partials[1])?];
        let rows = (local.m / w as usize) as u32;
        let reduce = |p: &HeapRegion<'a>| -> Result<ReduceParams> {
            let mut r = ReduceParams {
                out: out.addr(),
                flags: flags.addr(),
                launches: launches.addr(),
                diag: diag.abi(),
                timeout_ns: opts.timeout.as_nanos().min(u64::MAX as u128) as u64,
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
                let missing = || invalid("world", format!("rank {d}'s heap is not mapped here"));
                r.partials[d as usize] = p.peer(d).ok_or_else(missing)?;
                r.peer_flags[d as usize] = flags.peer(d).ok_or_else(missing)?;
            }
            Ok(r)
        };
        let reduce = [reduce(&partials[0])?, reduce(&partials[1])?];
        Ok(Unfused {
            gemms,
            reduce,
            _partials: partials,
            _flags: flags,
            _launches: launches,
            diag,
            calls: Cell::new(0),
        })
    }

    /// The path [`GemmRs::launch`] runs.
    pub fn path(&self) -> Path {
        self.path
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
            Path::Fused => {
                let cfg = LaunchConfig::linear(self.params.gemm.roles.total(), THREADS, SMEM_BYTES);
                // SAFETY: every address in params belongs to buffers this op owns or borrows for
                // 'a (peers' heaps stay mapped while the communicator lives).
                unsafe { gpu.launch(self.kernel, &cfg, &self.params)? };
                Ok(())
            }
            Path::Unfused => {
                let u = &self.unfused;
                let parity = (u.calls.get() % 2) as usize;
                u.calls.set(u.calls.get() + 1);
                u.gemms[parity].launch(gpu)?;
                self.launch_reduce(gpu, &u.reduce[parity])
            }
        }
    }

    /// The GEMM alone (this rank's partial, into the unfused path's buffer).
    pub fn launch_gemm_only(&self, gpu: &Gpu) -> Result<()> {
        self.unfused.gemms[0].launch(gpu)
    }

    fn launch_reduce(&self, gpu: &Gpu, p: &ReduceParams) -> Result<()> {
        let cfg = LaunchConfig::linear(gpu.info().sm_count, 256, 0);
        // SAFETY: the partials, flags and output belong to this op / the communicator's heap.
        unsafe { gpu.launch(kernels::REDUCE_PULL, &cfg, p)? };
        Ok(())
    }

    /// Wait for this rank's launches; report a device-side timeout.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        let sync = gpu.synchronize();
        self.diag.check()?;
        self.unfused.diag.check()?;
        for g in &self.unfused.gemms {
            g.check_diag()?;
        }
        self.comm.check()?;
        Ok(sync?)
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
