//! The GPU-driven all-gather (see `device/src/kernels/allgather.rs`): rank r's shard lands at
//! `r * shard_bytes` of every rank's output. Ranks on this node are reached over NVLink by the
//! kernel itself; ranks on other nodes through the communicator's FIFO, proxy and transport.
use crate::abi::{
    AllGatherParams, RoleSplit, COPY_BULK, COPY_CE_ENTER, COPY_CE_LEAVE, COPY_FAN, COPY_LSU, COPY_PULL, MAX_LOCAL_RANKS,
};
use crate::comm::communicator::{Communicator, HeapRegion};
use crate::comm::CommError;
use crate::error::{invalid, DiagBuffers, Result};
use crate::gpu::{kernels, DeviceBuffer, DeviceSlice, Gpu, LaunchConfig};
use mkernel_device::kernels_info::allgather::{BULK_SMEM_BYTES, THREADS};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// How the intra-comm CTAs move bytes over NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvlinkCopy {
    /// 16-byte vector loads and stores from all 512 threads of a CTA, eight vectors in flight
    /// per thread, each loaded once and stored to every local rank.
    Lsu,
    /// TMA bulk copies through a shared-memory ring, issued by one thread per CTA.
    Bulk,
    /// As `Bulk`, each piece loaded once and stored to every local rank at once.
    Fan,
    /// TMA bulk copies that read: each rank pulls every local peer's shard into its own output,
    /// the reads from every peer interleaved in each CTA.
    Pull,
    /// The copy engines: the host enqueues this rank's shard into every local peer's output,
    /// peer after peer on the op's stream, between two one-CTA launches of the kernel that only
    /// synchronise (the peers' `ready` before, the `data` flags after). The SMs stay free.
    CopyEngine,
    /// By shard size and ranks per node ([`NvlinkCopy::plan`]).
    Auto,
}

/// Shards from which `Auto` copies with [`NvlinkCopy::Lsu`] at up to two ranks per node (see
/// [`NvlinkCopy::plan`]).
pub const LSU_FROM_BYTES: usize = 8 << 20;

/// The same above two ranks per node, where `Fan` keeps up longer.
pub const LSU_FROM_BYTES_WIDE: usize = 16 << 20;

/// Shards from which `Auto` lets the copy engines move the bytes on one node of more than two
/// ranks (see [`NvlinkCopy::plan`]).
pub const CE_FROM_BYTES: usize = 16 << 20;

/// The same at two ranks, where the SMs' `Lsu` keeps up longer.
pub const CE_FROM_BYTES_TWO_RANKS: usize = 128 << 20;

impl NvlinkCopy {
    /// The way `ctas` CTAs (`None`: the way's default) copy a `shard_bytes` shard to a node of
    /// `local_world` ranks, in a world of `nodes` nodes. `Auto` takes, measured on 4x H200
    /// (docs/PERF.md "The all-gather from every thread's registers", "The copy engines move the
    /// all-gather's bytes"; GB/s per GPU, bus bandwidth, host barrier):
    /// - on one node, unless `ctas` is given, the copy engines ([`NvlinkCopy::CopyEngine`], one
    ///   synchronising CTA) from [`CE_FROM_BYTES`] (above two ranks) or
    ///   [`CE_FROM_BYTES_TWO_RANKS`] (at two): at world 4, 337-349 at 256 MiB (`Lsu` 307-313),
    ///   255-273 at 16 MiB shards (`Lsu` 230-236), 191-196 at 8 MiB shards (`Fan` 203, `Lsu`
    ///   180-191); at world 2, 333-342 at 128 MiB shards (`Lsu` 329-332), 294-301 at 64 MiB
    ///   (`Lsu` 310-313);
    /// - else from [`LSU_FROM_BYTES`] (at two ranks per node) or [`LSU_FROM_BYTES_WIDE`] (above)
    ///   on, `Lsu` on 64 CTAs: at 256 MiB 311-320 at world 4 against `Fan`'s 297-298 on 16 CTAs
    ///   (whose rate more CTAs do not raise), 328-331 at world 2 against `Bulk`'s 310-316; at 16
    ///   MiB (world 2) 156-162 against 132-155;
    /// - below, the bulk copies on 16 CTAs (`Fan` above two ranks per node, `Bulk` at two): at
    ///   16 MiB and world 4 `Lsu` on 64 CTAs moved 116-126 against `Fan`'s 137-155.
    ///
    /// ```
    /// use mkernel::ops::allgather::NvlinkCopy;
    /// assert_eq!(NvlinkCopy::Auto.plan(4, 1, 64 << 20, None), (NvlinkCopy::CopyEngine, 1));
    /// assert_eq!(NvlinkCopy::Auto.plan(4, 1, 8 << 20, None), (NvlinkCopy::Fan, 16));
    /// assert_eq!(NvlinkCopy::Auto.plan(4, 2, 64 << 20, None), (NvlinkCopy::Lsu, 64));
    /// assert_eq!(NvlinkCopy::Auto.plan(2, 2, 64 << 20, None), (NvlinkCopy::Lsu, 64));
    /// assert_eq!(NvlinkCopy::Auto.plan(2, 1, 64 << 20, None), (NvlinkCopy::Lsu, 64));
    /// assert_eq!(NvlinkCopy::Auto.plan(2, 1, 128 << 20, None), (NvlinkCopy::CopyEngine, 1));
    /// assert_eq!(NvlinkCopy::Auto.plan(2, 1, 128 << 20, Some(32)), (NvlinkCopy::Lsu, 32));
    /// assert_eq!(NvlinkCopy::Auto.plan(2, 1, 4 << 20, Some(8)), (NvlinkCopy::Bulk, 8));
    /// assert_eq!(NvlinkCopy::Lsu.plan(2, 1, 1 << 10, None), (NvlinkCopy::Lsu, 64));
    /// ```
    pub fn plan(self, local_world: u32, nodes: u32, shard_bytes: usize, ctas: Option<u32>) -> (NvlinkCopy, u32) {
        let (lsu_from, engines_from) = match local_world {
            ..=2 => (LSU_FROM_BYTES, CE_FROM_BYTES_TWO_RANKS),
            _ => (LSU_FROM_BYTES_WIDE, CE_FROM_BYTES),
        };
        // A CTA count asks for the SMs.
        let engines = nodes == 1 && local_world > 1 && ctas.is_none() && shard_bytes >= engines_from;
        let copy = match self {
            NvlinkCopy::Auto if engines => NvlinkCopy::CopyEngine,
            NvlinkCopy::Auto if shard_bytes >= lsu_from => NvlinkCopy::Lsu,
            NvlinkCopy::Auto if local_world > 2 => NvlinkCopy::Fan,
            NvlinkCopy::Auto => NvlinkCopy::Bulk,
            c => c,
        };
        // Every thread's stores need more CTAs than one thread's bulk copies to fill the links;
        // with the copy engines one CTA only synchronises.
        match copy {
            NvlinkCopy::CopyEngine => (copy, 1),
            NvlinkCopy::Lsu => (copy, ctas.unwrap_or(64)),
            _ => (copy, ctas.unwrap_or(16)),
        }
    }
}

/// Tuning settings.
#[derive(Clone, Debug)]
pub struct AllGatherOptions {
    /// CTAs copying over NVLink; `None`: the copy's default ([`NvlinkCopy::plan`]). Not with
    /// [`NvlinkCopy::CopyEngine`], whose one CTA moves nothing.
    pub intra_ctas: Option<u32>,
    /// How they copy.
    pub copy: NvlinkCopy,
    /// The shard is written straight into this rank's slice of the output
    /// ([`AllGather::input`] is that slice): no separate input buffer and no local copy.
    pub in_place: bool,
    /// Bytes per FIFO WRITE for other nodes.
    pub chunk_bytes: u64,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for AllGatherOptions {
    fn default() -> Self {
        Self {
            intra_ctas: None,
            copy: NvlinkCopy::Auto,
            in_place: false,
            chunk_bytes: 1 << 20,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Where the gathered output lives: a heap region of the op's own, or a range of one its owner
/// keeps (a fused op's unfused path gathers into the fused op's buffer).
enum Output<'c> {
    Own(HeapRegion<'c>),
    Borrowed { offset: u64, addr: u64, peers: Vec<Option<u64>> },
}

/// A bound all-gather: buffers and flags set up once; launched many times.
pub struct AllGather<'c> {
    comm: &'c Communicator,
    shard_bytes: usize,
    /// None when in place.
    input: Option<HeapRegion<'c>>,
    output: Output<'c>,
    _flags: HeapRegion<'c>,
    _counters: DeviceBuffer<u32>,
    _launches: DeviceBuffer<u64>,
    diag: DiagBuffers,
    params: AllGatherParams,
    /// How the intra-comm CTAs copy (`Auto` resolved by [`NvlinkCopy::plan`]).
    copy: NvlinkCopy,
    /// With the copy engines: the leaving launch's parameters, and (out of place) a second
    /// stream copying this rank's shard into its own output beside the peers' copies.
    engine: Option<(AllGatherParams, Option<Gpu>)>,
    /// With the copy engines: a launch was enqueued only in part (its entering launch without
    /// the rest), so the two launch counters no longer agree and the op must be built again.
    broken: AtomicBool,
}

impl<'c> AllGather<'c> {
    /// Collective: every rank calls it with the same `shard_bytes` and options.
    pub fn new(comm: &'c Communicator, gpu: &Gpu, shard_bytes: usize, opts: AllGatherOptions) -> Result<Self> {
        Self::validate(comm, shard_bytes, &opts)?;
        let total = shard_bytes * comm.world().world_size as usize;
        let output = comm.alloc(total)?;
        Self::build(comm, gpu, shard_bytes, opts, Output::Own(output))
    }

    /// Collective: an in-place all-gather into `region` (at least `world * shard_bytes` bytes),
    /// which the caller keeps: rank r writes its shard at `r * shard_bytes` of it.
    pub fn in_region(
        comm: &'c Communicator,
        gpu: &Gpu,
        region: &HeapRegion<'c>,
        shard_bytes: usize,
        opts: AllGatherOptions,
    ) -> Result<Self> {
        let opts = AllGatherOptions { in_place: true, ..opts };
        Self::validate(comm, shard_bytes, &opts)?;
        let total = shard_bytes * comm.world().world_size as usize;
        if region.len() < total {
            return Err(invalid("region", format!("holds {} bytes; the all-gather needs {total}", region.len())));
        }
        let peers = (0..comm.world().world_size).map(|r| region.peer(r)).collect();
        let output = Output::Borrowed { offset: region.offset(), addr: region.addr(), peers };
        Self::build(comm, gpu, shard_bytes, opts, output)
    }

    fn validate(comm: &Communicator, shard_bytes: usize, opts: &AllGatherOptions) -> Result<()> {
        let world = comm.world();
        if shard_bytes == 0 {
            return Err(invalid("shard_bytes", "must be at least 1"));
        }
        if world.local_world_size as usize > MAX_LOCAL_RANKS {
            return Err(invalid(
                "world",
                format!("{} ranks per node; at most {MAX_LOCAL_RANKS}", world.local_world_size),
            ));
        }
        let total = shard_bytes as u64 * world.world_size as u64;
        if total >= 1 << 48 {
            return Err(invalid("shard_bytes", format!("output of {total} bytes exceeds the 2^48 FIFO offset range")));
        }
        if let Some(n @ (0 | 1025..)) = opts.intra_ctas {
            return Err(invalid("intra_ctas", format!("{n} must be in 1..=1024")));
        }
        if let (Some(n), NvlinkCopy::CopyEngine) = (opts.intra_ctas, opts.copy) {
            return Err(invalid(
                "intra_ctas",
                format!("{n} given, but the copy engines move the bytes: leave it unset"),
            ));
        }
        if opts.chunk_bytes == 0 {
            return Err(invalid("chunk_bytes", "must be at least 1"));
        }
        comm.agree("shard_bytes", &format!("shard {shard_bytes} B, {:?}", (opts.intra_ctas, opts.copy, opts.in_place)))
    }

    fn build(
        comm: &'c Communicator,
        gpu: &Gpu,
        shard_bytes: usize,
        opts: AllGatherOptions,
        output: Output<'c>,
    ) -> Result<Self> {
        let world = comm.world();
        let w = world.world_size;
        let (out_addr, out_off) = match &output {
            Output::Own(r) => (r.addr(), r.offset()),
            Output::Borrowed { offset, addr, .. } => (*addr, *offset),
        };
        let out_peer = |r: u32| match &output {
            Output::Own(reg) => reg.peer(r),
            Output::Borrowed { peers, .. } => peers[r as usize],
        };
        let input = if opts.in_place { None } else { Some(comm.alloc(shard_bytes)?) };
        let (input_addr, input_off) = match &input {
            Some(b) => (b.addr(), b.offset()),
            None => {
                (out_addr + world.rank as u64 * shard_bytes as u64, out_off + world.rank as u64 * shard_bytes as u64)
            }
        };
        let (copy, ctas) = opts.copy.plan(world.local_world_size, world.nodes, shard_bytes, opts.intra_ctas);
        let flags = comm.alloc(12 * w as usize)?; // data[w], ready[w], taken[w]
        let counters = gpu.upload(&vec![0u32; 2 * world.local_world_size as usize])?; // pushes, then pulls
        let launches = gpu.upload(&[0u64; 2])?; // the launch, and the copy engines' leaving one
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let mut params = AllGatherParams {
            input: input_addr,
            output: out_addr,
            flags: flags.addr(),
            counters: counters.addr(),
            launches: launches.addr(),
            fifo: comm.fifo_params(),
            diag: diag.abi(),
            timeout_ns: opts.timeout.as_nanos().min(u64::MAX as u128) as u64,
            shard_bytes: shard_bytes as u64,
            chunk_bytes: opts.chunk_bytes,
            input_heap_off: input_off,
            output_heap_off: out_off,
            flags_heap_off: flags.offset(),
            rank: world.rank,
            world: w,
            local_rank: world.local_rank,
            local_world: world.local_world_size,
            roles: RoleSplit { compute: 0, intra_comm: ctas, inter_send: (world.nodes > 1) as u32, inter_reduce: 0 },
            copy_mode: match copy {
                NvlinkCopy::Lsu => COPY_LSU,
                NvlinkCopy::Bulk => COPY_BULK,
                NvlinkCopy::Fan => COPY_FAN,
                NvlinkCopy::Pull => COPY_PULL,
                NvlinkCopy::CopyEngine => COPY_CE_ENTER,
                NvlinkCopy::Auto => unreachable!("`plan` resolves Auto"),
            },
            in_place: opts.in_place as u32,
            ..Default::default()
        };
        for lr in 0..world.local_world_size {
            let r = world.local_to_global(lr);
            let missing = || CommError::Bootstrap {
                rank: world.rank,
                what: format!("rank {r} is on this node but its heap is not mapped (another host?)"),
            };
            params.peer_output[lr as usize] = out_peer(r).ok_or_else(missing)?;
            // A peer's shard: its input region, or its own slice of its output when in place.
            params.peer_input[lr as usize] = match &input {
                Some(b) => b.peer(r).ok_or_else(missing)?,
                None => out_peer(r).ok_or_else(missing)? + r as u64 * shard_bytes as u64,
            };
            params.peer_flags[lr as usize] = flags.peer(r).ok_or_else(missing)?;
        }
        let engine = match copy {
            NvlinkCopy::CopyEngine => {
                let leave = AllGatherParams {
                    copy_mode: COPY_CE_LEAVE,
                    launches: launches.addr() + 8,
                    roles: RoleSplit { compute: 0, intra_comm: 1, inter_send: 0, inter_reduce: 0 },
                    ..params
                };
                let side = if opts.in_place { None } else { Some(Gpu::new(gpu.info().ordinal)?) };
                Some((leave, side))
            }
            _ => None,
        };
        comm.barrier()?;
        Ok(AllGather {
            comm,
            shard_bytes,
            input,
            output,
            _flags: flags,
            _counters: counters,
            _launches: launches,
            diag,
            params,
            copy,
            engine,
            broken: AtomicBool::new(false),
        })
    }

    /// This rank's shard: write it here before a launch.
    pub fn input(&self) -> DeviceSlice<'_, u8> {
        match &self.input {
            Some(b) => b.bytes_view(),
            None => {
                let r = self.comm.world().rank as usize;
                self.output().slice(r * self.shard_bytes..(r + 1) * self.shard_bytes)
            }
        }
    }

    /// The gathered result (`world * shard_bytes`), valid after [`AllGather::wait`].
    pub fn output(&self) -> DeviceSlice<'_, u8> {
        let len = self.shard_bytes * self.comm.world().world_size as usize;
        match &self.output {
            Output::Own(r) => r.bytes_view().slice(0..len),
            // SAFETY: the owner keeps the region (at least `len` bytes, checked) alive while this
            // op exists, and the op borrows the communicator whose heap holds it.
            Output::Borrowed { addr, .. } => unsafe { DeviceSlice::from_raw(*addr, len) },
        }
    }

    /// Rank `r`'s output as mapped in this process (None: another host).
    pub fn peer_output(&self, r: u32) -> Option<u64> {
        match &self.output {
            Output::Own(reg) => reg.peer(r),
            Output::Borrowed { peers, .. } => peers[r as usize],
        }
    }

    /// Shard size.
    pub fn shard_bytes(&self) -> usize {
        self.shard_bytes
    }

    /// CTAs copying over NVLink (the options' count or the copy's default).
    pub fn intra_ctas(&self) -> u32 {
        self.params.roles.intra_comm
    }

    /// How they copy (`Auto` resolved).
    pub fn copy(&self) -> NvlinkCopy {
        self.copy
    }

    /// Grid size (intra + inter CTAs).
    pub fn ctas(&self) -> u32 {
        self.params.roles.total()
    }

    /// Enqueue one all-gather (asynchronous). Launches may follow each other with no host wait,
    /// and the input may be rewritten on the stream between them, on one node and across nodes
    /// alike: a launch ends only once every local peer that pulls has taken this rank's shard
    /// and the proxy's WRITEs for other nodes have read it (the FIFO's released position);
    /// `rank-check allgather` runs its launches back to back on alternating inputs.
    /// [`AllGather::run`] adds a wait and a barrier (every rank done with the launch).
    ///
    /// With [`NvlinkCopy::CopyEngine`] a peer that does not enter within the timeout stops this
    /// process's CUDA context (see the kernel); and after any report, or a launch that could be
    /// enqueued only in part, the op refuses further launches with that error: build it again.
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        if self.engine.is_some() {
            // An earlier report leaves the abort word set, so the next entering launch would give
            // up at once and stop the context: refuse before enqueueing anything.
            self.diag.check()?;
            if self.broken.load(Ordering::Relaxed) {
                return Err(invalid(
                    "launch",
                    "an earlier launch was enqueued only in part: build the all-gather again",
                ));
            }
        }
        let smem = if matches!(self.params.copy_mode, COPY_LSU | COPY_CE_ENTER) { 0 } else { BULK_SMEM_BYTES };
        let cfg = LaunchConfig::linear(self.ctas(), THREADS, smem);
        if let Some((_, Some(side))) = &self.engine {
            side.wait_for(gpu)?; // the local copy follows whatever used the output before
        }
        // SAFETY: every address in params belongs to buffers owned by self or by the
        // communicator's heap (peers' mapped copies included), alive until every rank passed the
        // closing barrier of run / drop.
        unsafe { gpu.launch(kernels::ALLGATHER, &cfg, &self.params)? };
        let Some((leave, side)) = &self.engine else { return Ok(()) };
        self.enqueue_engine_copies(gpu, leave, side.as_ref())
            .inspect_err(|_| self.broken.store(true, Ordering::Relaxed))
    }

    /// The copy engines' part of a launch after its entering one: the copies, then the leaving
    /// launch.
    fn enqueue_engine_copies(&self, gpu: &Gpu, leave: &AllGatherParams, side: Option<&Gpu>) -> Result<()> {
        let p = &self.params;
        let dst = |lr: u32| p.peer_output[lr as usize] + p.rank as u64 * p.shard_bytes;
        if let Some(side) = side {
            // SAFETY: our input and our own slice of our output, `shard_bytes` each, alive until
            // every rank passed the closing barrier of run / drop (as every launch's, see `launch`).
            unsafe { side.copy_async(p.output + p.rank as u64 * p.shard_bytes, p.input, self.shard_bytes)? };
        }
        // Peer after peer on one stream, each rank starting at the next: at every step a ring shift
        // across the ranks (the copy engines' fastest form here, docs/PERF.md).
        for k in 1..p.local_world {
            let lr = crate::sched::next_peer(p.local_rank, p.local_world, k);
            // SAFETY: our input, and our slice of local peer `lr`'s mapped output, which the
            // entering launch (queued before) waited to be ready; alive as above.
            unsafe { gpu.copy_async(dst(lr), p.input, self.shard_bytes)? };
        }
        if let Some(side) = side {
            gpu.wait_for(side)?;
        }
        // SAFETY: as the entering launch; one CTA, no shared memory.
        unsafe { gpu.launch(kernels::ALLGATHER, &LaunchConfig::linear(1, THREADS, 0), leave)? };
        Ok(())
    }

    /// Wait for this rank's launches; report a device-side timeout or a proxy error.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        self.diag.wait(gpu, "all-gather", || self.comm.check())
    }

    /// What this op's launches reported so far (its wait record, then the proxy); read while
    /// they run too.
    pub fn check(&self) -> Result<()> {
        self.diag.check()?;
        self.comm.check()
    }

    /// Launch, wait, then a bootstrap barrier (all ranks done with this launch's data).
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.wait(gpu)?;
        Ok(self.comm.barrier()?)
    }
}
