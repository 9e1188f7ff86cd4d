//! Ring attention (sequence / context parallelism): rank `r` of `W` holds Q, K and V for its
//! shard of the sequence and gets O (and the log-sum-exp) for its query rows attending to the
//! whole sequence. ONE persistent launch per call (`device/src/kernels/ring_attention.rs`):
//! attention CTAs run the flash-attention pieces step by step, step `s` on the K/V of rank
//! `(r - s) mod W`, merging the partial outputs by log-sum-exp in the kernel; comm CTAs pass each
//! step's K/V on to rank `r + 1` while it is being used (NVLink inside a node; FIFO + proxy to
//! another node), into its receive slot for the next step (by default one per step: `W - 1`,
//! see [`RingOptions::slots`]). No host involvement between steps.
//!
//! Causal attention runs load-balanced on a **zigzag** layout: the sequence is cut into `2W`
//! chunks and rank `r` holds chunks `r` and `2W - 1 - r` (its first `seq / 2` rows, then its last
//! `seq / 2`), so every rank does the same work. [`zigzag_shard`] / [`zigzag_unshard`] convert
//! a whole sequence to and from that layout; non-causal attention (or `zigzag: false`) uses plain
//! contiguous shards (rank `r` holds rows `r S/W .. (r+1) S/W`).
//!
//! ```no_run
//! # fn main() -> Result<(), mkernel::Error> {
//! use mkernel::attention::{AttentionShape, AttnLayout};
//! use mkernel::comm::{communicator::{CommOptions, Communicator}, world::World};
//! use mkernel::ops::ring_attention::{RingAttention, RingOptions};
//! let world = World::from_env()?;
//! let gpu = mkernel::Gpu::new(world.device)?;
//! // This rank's shard: 8192 of the sequence's 8192 * W rows.
//! let shape = AttentionShape { batch: 1, heads: 32, heads_kv: 32, seq_q: 8192, seq_k: 8192, head_dim: 128 };
//! let opts = RingOptions::default();
//! let heap_bytes = RingAttention::heap_bytes(shape, world.world_size, &opts);
//! let comm = Communicator::new(&gpu, &world, CommOptions { heap_bytes, ..Default::default() })?;
//! let q = gpu.alloc::<half::bf16>(shape.q_elements())?;
//! let o = gpu.alloc::<half::bf16>(shape.q_elements())?;
//! let ring = RingAttention::new(&comm, &gpu, shape, AttnLayout::Bhsd, &q, &o, None, opts)?;
//! let kv = vec![half::bf16::ONE; shape.kv_elements()];
//! ring.k().copy_from(&kv)?; // K and V live in the communicator's heap
//! ring.v().copy_from(&kv)?;
//! ring.run(&gpu)?;
//! # Ok(()) }
//! ```
use super::attention::{base_params, resolve_scale, tensor_map, AttentionShape, AttnLayout, Side};
use super::tuned;
use crate::abi::{RingAttnParams, SeqPos};
use crate::comm::communicator::{Communicator, HeapRegion, HEAP_ALIGN};
use crate::comm::transport::NicModel;
use crate::error::{invalid, need_len, DiagBuffers, Result};
use crate::gpu::{kernels, DeviceBuffer, DeviceSlice, Gpu, LaunchConfig, TensorMap};
use half::bf16;
use mkernel_device::kernels_info::attention::{consumers, ring_smem_bytes, threads};
use std::time::Duration;

/// Options of a ring attention.
#[derive(Clone, Copy, Debug)]
pub struct RingOptions {
    /// Causal mask over the whole sequence's positions.
    pub causal: bool,
    /// Shards are zigzag (see the module docs); only meaningful with `causal` (the default there).
    pub zigzag: bool,
    /// Softmax scale (default `1 / sqrt(head_dim)`).
    pub scale: Option<f32>,
    /// CTAs passing K/V on over NVLink (default: [`tuned::ring_comm_ctas`], 8 or more so that a
    /// step's K/V moves in well under a step's attention; one when the next rank is on another
    /// node, where the proxy moves the data).
    pub comm_ctas: Option<u32>,
    /// Receive slots for the K/V of later steps, each as large as this rank's K and V, in the
    /// communicator's heap: 2 ..= `W - 1` (1 at `W = 2`), the same on every rank. The default,
    /// `W - 1`, gives every step its own slot, so the comm CTAs send each step as soon as it is
    /// in and then join the attention. With fewer, a send waits until the next rank has finished
    /// the step that last used the slot (memory against comm CTAs idling: at 1 x 4 H200 two
    /// slots cost 1.5-2% on three of four configs). One slot cannot work with forwarding: every
    /// rank's only slot would wait for the next rank to empty its own.
    pub slots: Option<u32>,
    /// Tiles walked one step per unit, merging each step into a running output in memory,
    /// while the later steps' K/V arrives; every other tile is one unit over all the steps,
    /// with its running output in registers (default: [`tuned::ring_split_tiles`], from the
    /// modelled time of a hop against a step; every tile when the slots are reused, see
    /// [`RingOptions::slots`]). More than the tiles means all of them.
    pub split_tiles: Option<u32>,
    /// Bound on every device-side wait.
    pub timeout: Duration,
}

impl Default for RingOptions {
    fn default() -> Self {
        Self {
            causal: false,
            zigzag: true,
            scale: None,
            comm_ctas: None,
            slots: None,
            split_tiles: None,
            timeout: Duration::from_secs(10),
        }
    }
}

/// Bytes of one rank's K and V together: its own copy, one receive slot, one step's send.
fn step_kv_bytes(shape: AttentionShape) -> usize {
    2 * 2 * shape.kv_elements()
}

/// The default receive slots for `world` ranks: one per step after the first (at least 1).
fn default_slots(world: u32) -> u32 {
    world.saturating_sub(1).max(1)
}

/// Receive slots for `world` ranks: `opts.slots`, or [`default_slots`]; a typed error for a
/// count outside `2 ..= world - 1` (`1` at `world` 2; anything at `world` 1, which sends
/// nothing).
fn slot_count(world: u32, opts: &RingOptions) -> Result<u32> {
    let slots = opts.slots.unwrap_or(default_slots(world)).max(1);
    let fewest = world.saturating_sub(1).clamp(1, 2);
    match opts.slots {
        Some(n) if world > 1 && n < fewest => Err(invalid(
            "slots",
            format!("{n} receive slot(s) for {world} ranks: at least {fewest} (a ring that passes K/V on needs two)"),
        )),
        Some(n) if world > 1 && n >= world => Err(invalid(
            "slots",
            format!("{n} receive slots for {world} ranks: at most one per step after the first, {}", world - 1),
        )),
        _ => Ok(slots),
    }
}

/// A ring attention bound to its buffers, launched many times.
pub struct RingAttention<'a> {
    comm: &'a Communicator,
    shape: AttentionShape,
    params: RingAttnParams,
    kernel: kernels::Kernel<RingAttnParams>,
    kv_local: HeapRegion<'a>,
    _slots: HeapRegion<'a>,
    _flags: HeapRegion<'a>,
    _maps: DeviceBuffer<TensorMap>,
    _launches: DeviceBuffer<u64>,
    _counters: DeviceBuffer<u32>,
    _o_acc: DeviceBuffer<f32>,
    _lse_acc: DeviceBuffer<f32>,
    _sched: DeviceBuffer<u64>,
    _tile_flags: DeviceBuffer<u32>,
    diag: DiagBuffers,
}

impl<'a> RingAttention<'a> {
    /// Heap bytes ([`crate::comm::communicator::CommOptions::heap_bytes`]) a ring attention
    /// over `world` ranks with this rank's shard `shape` and options `opts` takes: its K and V,
    /// the receive slots, the flags.
    pub fn heap_bytes(shape: AttentionShape, world: u32, opts: &RingOptions) -> usize {
        let kv_bytes = step_kv_bytes(shape);
        let flags = 4 * RingAttnParams::flag_words(world) as usize;
        // Each allocation is rounded up to the heap's alignment.
        let up = |b: usize| b.div_ceil(HEAP_ALIGN) * HEAP_ALIGN;
        // A bad slot count is refused by `new`; here it counts as the default.
        let slots = slot_count(world, opts).unwrap_or(default_slots(world));
        up(kv_bytes) + up(slots as usize * kv_bytes) + up(flags)
    }

    /// Collective: validate (typed errors before anything runs), agree on the shape and options
    /// across ranks, allocate K/V and the receive slots in the communicator's heap (see
    /// [`RingAttention::heap_bytes`]), encode the tensor maps. `shape` is this rank's shard
    /// (`seq_q == seq_k`, the same on every rank); the caller writes its K and V into
    /// [`RingAttention::k`] and [`RingAttention::v`].
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        comm: &'a Communicator,
        gpu: &Gpu,
        shape: AttentionShape,
        layout: AttnLayout,
        q: &'a DeviceBuffer<bf16>,
        o: &'a DeviceBuffer<bf16>,
        lse: Option<&'a DeviceBuffer<f32>>,
        opts: RingOptions,
    ) -> Result<Self> {
        let world = comm.world().clone();
        shape.validate()?;
        if shape.seq_q != shape.seq_k {
            return Err(invalid(
                "seq_k",
                format!(
                    "{} differs from seq_q = {}: every rank holds the same rows of Q, K and V",
                    shape.seq_k, shape.seq_q
                ),
            ));
        }
        let zigzag = opts.causal && opts.zigzag;
        if zigzag && !shape.seq_q.is_multiple_of(2) {
            return Err(invalid(
                "seq_q",
                format!("{} is odd: a zigzag shard is two chunks of seq / 2 rows", shape.seq_q),
            ));
        }
        let total = shape.seq_q as u128 * world.world_size as u128;
        if total > i32::MAX as u128 {
            return Err(invalid("seq_q", format!("the whole sequence ({total} rows) exceeds 2^31 - 1")));
        }
        need_len("q", q.len(), shape.q_elements())?;
        need_len("o", o.len(), shape.q_elements())?;
        if let Some(l) = lse {
            need_len("lse", l.len(), shape.lse_elements())?;
        }
        let scale = resolve_scale(opts.scale, shape.head_dim)?;
        let next = (world.rank + 1) % world.world_size;
        let prev = (world.rank + world.world_size - 1) % world.world_size;
        let next_local = world.is_local(next);
        let kv_bytes = step_kv_bytes(shape);
        let step_flops = flops_per_rank(shape, world.world_size, opts.causal) / world.world_size as f64;
        let comm_ctas = match (world.world_size, opts.comm_ctas) {
            (1, _) => 0,
            (_, Some(0)) => return Err(invalid("comm_ctas", "must be at least 1 with several ranks")),
            (_, Some(c)) => c,
            (_, None) if next_local => tuned::ring_comm_ctas(kv_bytes as u64, step_flops),
            (_, None) => 1,
        };
        let slots = slot_count(world.world_size, &opts)?;
        let sms = gpu.info().sm_count;
        if comm_ctas >= sms {
            return Err(invalid("comm_ctas", format!("{comm_ctas} leaves no attention CTA on {sms} SMs")));
        }
        // `comm_ctas` stays out: it only splits this rank's own sends (the receiver counts no
        // senders), and its default differs by rank across nodes (4 to a peer over NVLink, 1
        // for the proxy's single WRITE).
        comm.agree(
            "shape",
            &format!(
                "ring_attention {shape:?} {layout:?} causal {} zigzag {zigzag} scale {scale} slots {slots}",
                opts.causal
            ),
        )?;

        let kv_local = comm.alloc(kv_bytes)?;
        let slot_bytes = comm.alloc(slots as usize * kv_bytes)?;
        let flags = comm.alloc(4 * RingAttnParams::flag_words(world.world_size) as usize)?;
        let half = kv_bytes as u64 / 2;
        let kv =
            |base: u64| [tensor_map(base, shape, Side::Kv, layout), tensor_map(base + half, shape, Side::Kv, layout)];
        let mut tiles =
            vec![tensor_map(q.addr(), shape, Side::Q, layout), tensor_map(o.addr(), shape, Side::O, layout)];
        tiles.extend(kv(kv_local.addr()));
        for i in 0..slots as u64 {
            tiles.extend(kv(slot_bytes.addr() + i * kv_bytes as u64));
        }
        let maps = gpu.upload_tensor_maps(&tiles)?;
        let launches = gpu.upload(&[0u64])?;
        let counters = gpu.upload(&vec![0u32; RingAttnParams::counter_words(world.world_size) as usize])?;
        let o_acc = gpu.alloc::<f32>(shape.q_elements())?;
        let lse_acc = gpu.alloc::<f32>(shape.lse_elements())?;
        let diag = DiagBuffers::new(gpu, opts.timeout)?;
        let sched = gpu.upload(&[0u64; 2])?;
        let tiles_per_step = shape.tiles();
        let attn_ctas = (sms - comm_ctas).min(tiles_per_step);
        let tile_flags = gpu.upload(&vec![0u32; (consumers(shape.head_dim as u32) * tiles_per_step) as usize])?;
        let chunk = if zigzag { shape.seq_q / 2 } else { shape.seq_q } as u32;
        let mut attn = base_params(shape, layout, (opts.causal, scale, opts.timeout), &diag, sched.addr());
        (attn.q_map, attn.o_map, attn.lse) = (maps.addr(), maps.addr() + 128, lse.map_or(0, |l| l.addr()));
        (attn.o_acc, attn.lse_acc, attn.tile_flags) = (o_acc.addr(), lse_acc.addr(), tile_flags.addr());
        let mut params = RingAttnParams {
            attn,
            kv_maps: maps.addr() + 256,
            fifo: comm.fifo_params(),
            flags: flags.addr(),
            prev_flags: if world.is_local(prev) { flags.peer(prev).unwrap_or(0) } else { 0 },
            next_flags: if next_local { flags.peer(next).unwrap_or(0) } else { 0 },
            kv_local: kv_local.addr(),
            slots: slot_bytes.addr(),
            next_slots: if next_local { slot_bytes.peer(next).unwrap_or(0) } else { 0 },
            kv_local_heap_off: kv_local.offset(),
            slots_heap_off: slot_bytes.offset(),
            flags_heap_off: flags.offset(),
            launches: launches.addr(),
            counters: counters.addr(),
            kv_bytes: kv_bytes as u64,
            rank: world.rank,
            world: world.world_size,
            next,
            prev,
            attn_ctas,
            comm_ctas,
            zigzag: zigzag as u32,
            chunk,
            slot_count: slots,
            split_tiles: tiles_per_step,
        };
        if !params.reused(1) {
            // A hop: over NVLink at the comm CTAs' rate, or through the proxy at the NIC's. A
            // step's K/V may have crossed any link of the ring on its way here, so with several
            // nodes the slowest link, the NIC, sets the pace for every rank.
            let hop_s = if world.nodes == 1 {
                kv_bytes as f64 / (comm_ctas as f64 * tuned::AG_GEMM_PUSH_RATE)
            } else {
                NicModel::cx7().transfer_time(kv_bytes as u64).as_secs_f64()
            };
            let modelled = tuned::ring_split_tiles(tiles_per_step, step_flops, hop_s);
            params.split_tiles = opts.split_tiles.unwrap_or(modelled).min(tiles_per_step);
        }
        if world.world_size > 1 && next_local && (params.next_flags == 0 || params.next_slots == 0) {
            return Err(invalid("world", format!("rank {next} is on this node but its heap is not mapped here")));
        }
        if world.world_size > 1 && world.is_local(prev) && params.prev_flags == 0 {
            return Err(invalid("world", format!("rank {prev} is on this node but its heap is not mapped here")));
        }
        params.attn.q_pos = params.positions(world.rank);
        let kernel = if shape.head_dim == 64 { kernels::RING_ATTENTION_D64 } else { kernels::RING_ATTENTION_D128 };
        comm.barrier()?;
        Ok(Self {
            comm,
            shape,
            params,
            kernel,
            kv_local,
            _slots: slot_bytes,
            _flags: flags,
            _maps: maps,
            _launches: launches,
            _counters: counters,
            _o_acc: o_acc,
            _lse_acc: lse_acc,
            _sched: sched,
            _tile_flags: tile_flags,
            diag,
        })
    }

    /// This rank's shard.
    pub fn shape(&self) -> AttentionShape {
        self.shape
    }

    /// This rank's K (in the communicator's heap): the caller fills it before launching.
    pub fn k(&self) -> DeviceSlice<'_, bf16> {
        // SAFETY: the first half of `kv_local` (owned by self) holds the shard's K.
        unsafe { DeviceSlice::from_raw(self.kv_local.addr(), self.shape.kv_elements()) }
    }

    /// This rank's V (in the communicator's heap).
    pub fn v(&self) -> DeviceSlice<'_, bf16> {
        let off = 2 * self.shape.kv_elements() as u64;
        // SAFETY: the second half of `kv_local` (owned by self) holds the shard's V.
        unsafe { DeviceSlice::from_raw(self.kv_local.addr() + off, self.shape.kv_elements()) }
    }

    /// Attention CTAs and comm CTAs of a launch.
    pub fn ctas(&self) -> (u32, u32) {
        (self.params.attn_ctas, self.params.comm_ctas)
    }

    /// Tiles walked one step per unit (see [`RingOptions::split_tiles`]) of the tiles per step.
    pub fn split_tiles(&self) -> (u32, u32) {
        (self.params.split_tiles, self.shape.tiles())
    }

    /// Receive slots (see [`RingOptions::slots`]).
    pub fn slots(&self) -> u32 {
        self.params.slot_count
    }

    /// Bytes of K and V one step passes on to the next rank (one receive slot).
    pub fn step_bytes(&self) -> u64 {
        self.params.kv_bytes
    }

    /// Enqueue one ring attention on `gpu`'s stream (asynchronous). Every rank launches.
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        let p = &self.params;
        let d = self.shape.head_dim as u32;
        let cfg = LaunchConfig::linear(p.attn_ctas + p.comm_ctas, threads(d), ring_smem_bytes(d));
        // SAFETY: every address in the parameters belongs to buffers this op owns or borrows for
        // 'a (peers' heaps stay mapped while the communicator lives); the caller synchronises
        // before dropping them (run / wait).
        unsafe { gpu.launch(self.kernel, &cfg, p)? };
        Ok(())
    }

    /// Wait for this rank's launches; report a device-side timeout or a proxy error.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        self.diag.wait(gpu, "ring-attention", || self.comm.check())
    }

    /// Launch and wait.
    pub fn run(&self, gpu: &Gpu) -> Result<()> {
        self.launch(gpu)?;
        self.wait(gpu)
    }

    /// Positions of rank `r`'s rows in the whole sequence, as this op lays shards out.
    pub fn positions(&self, r: u32) -> SeqPos {
        self.params.positions(r)
    }

    /// Floating-point operations one rank performs per call, counted as torch_baselines.py counts
    /// a ring (`4 b h s^2 d` per visible block of `s` rows, half for the diagonal; the same for a
    /// zigzag causal ring): what TFLOP/s per GPU divides.
    pub fn flops_per_rank(&self) -> f64 {
        flops_per_rank(self.shape, self.params.world, self.params.attn.causal != 0)
    }
}

/// [`RingAttention::flops_per_rank`] of a ring over `world` ranks with shard `s`.
fn flops_per_rank(s: AttentionShape, world: u32, causal: bool) -> f64 {
    let w = world as f64;
    let block = 4.0 * (s.batch * s.heads) as f64 * (s.seq_q as f64).powi(2) * s.head_dim as f64;
    if causal {
        block * ((w * (w - 1.0) / 2.0) / w + 0.5)
    } else {
        block * w
    }
}

/// Rank `rank`'s shard of a whole-sequence tensor `full` (`[batch, S, heads, d]` or `[batch,
/// heads, S, d]` per `layout`, `S = world * shard`): zigzag chunks `rank` and `2W - 1 - rank`
/// when `zigzag`, else rows `rank * shard ..`.
pub fn zigzag_shard<T: Copy>(
    full: &[T],
    layout: AttnLayout,
    (batch, seq, heads, d): (usize, usize, usize, usize),
    (world, rank): (usize, usize),
    zigzag: bool,
) -> Vec<T> {
    let shard = seq / world;
    let pos = |x: usize| shard_position(x, shard, (world, rank), zigzag);
    let mut out = Vec::with_capacity(full.len() / world);
    // Walk the shard in its own layout order, reading each element from its place in `full`.
    let idx = |b: usize, h: usize, row: usize, e: usize, rows: usize| {
        super::attention::index(layout, (b, h, row, e), rows, heads, d)
    };
    out.resize(batch * shard * heads * d, full[0]);
    for b in 0..batch {
        for h in 0..heads {
            for x in 0..shard {
                let (src, dst) = (idx(b, h, pos(x), 0, seq), idx(b, h, x, 0, shard));
                out[dst..dst + d].copy_from_slice(&full[src..src + d]);
            }
        }
    }
    out
}

/// The whole-sequence tensor from every rank's shard (`shards[r]` is rank `r`'s), the inverse of
/// [`zigzag_shard`].
pub fn zigzag_unshard<T: Copy>(
    shards: &[Vec<T>],
    layout: AttnLayout,
    (batch, seq, heads, d): (usize, usize, usize, usize),
    zigzag: bool,
) -> Vec<T> {
    let world = shards.len();
    let shard = seq / world;
    let mut full = vec![shards[0][0]; batch * seq * heads * d];
    let idx =
        |b: usize, h: usize, row: usize, rows: usize| super::attention::index(layout, (b, h, row, 0), rows, heads, d);
    for (rank, part) in shards.iter().enumerate() {
        for b in 0..batch {
            for h in 0..heads {
                for x in 0..shard {
                    let (dst, src) =
                        (idx(b, h, shard_position(x, shard, (world, rank), zigzag), seq), idx(b, h, x, shard));
                    full[dst..dst + d].copy_from_slice(&part[src..src + d]);
                }
            }
        }
    }
    full
}

/// Position in the whole sequence of row `x` of rank `rank`'s shard of `shard` rows.
pub fn shard_position(x: usize, shard: usize, (world, rank): (usize, usize), zigzag: bool) -> usize {
    let chunk = if zigzag { shard / 2 } else { shard };
    SeqPos::shard(rank as u32, world as u32, chunk as u32, zigzag).at(x as u32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zigzag_round_trips_and_balances_chunks() {
        let (batch, seq, heads, d, world) = (2, 24, 3, 4, 3);
        let full: Vec<u32> = (0..(batch * seq * heads * d) as u32).collect();
        for layout in [AttnLayout::Bshd, AttnLayout::Bhsd] {
            for zigzag in [false, true] {
                let shards: Vec<Vec<u32>> = (0..world)
                    .map(|r| zigzag_shard(&full, layout, (batch, seq, heads, d), (world, r), zigzag))
                    .collect();
                assert_eq!(zigzag_unshard(&shards, layout, (batch, seq, heads, d), zigzag), full);
            }
        }
        // Rank 0 of 3 holds chunks 0 and 5 (of 4 rows each).
        let rows: Vec<usize> = (0..8).map(|x| shard_position(x, 8, (3, 0), true)).collect();
        assert_eq!(rows, [0, 1, 2, 3, 20, 21, 22, 23]);
    }

    #[test]
    fn slot_counts() {
        let with = |slots| RingOptions { slots, ..Default::default() };
        assert_eq!(slot_count(4, &with(None)).unwrap(), 3, "one per step after the first");
        assert_eq!(slot_count(2, &with(None)).unwrap(), 1);
        assert_eq!(slot_count(1, &with(None)).unwrap(), 1);
        assert_eq!(slot_count(8, &with(Some(2))).unwrap(), 2);
        for (world, slots) in [(4, 1), (3, 1), (4, 4), (2, 2), (2, 0), (8, 0)] {
            let err = slot_count(world, &with(Some(slots))).unwrap_err().to_string();
            assert!(err.contains("slots"), "{world} ranks, {slots} slots: {err}");
        }
    }

    #[test]
    fn device_positions_match_the_host_layout() {
        for world in 1..=8u32 {
            for rank in 0..world {
                for zigzag in [false, true] {
                    let p = RingAttnParams {
                        world,
                        rank,
                        zigzag: zigzag as u32,
                        chunk: if zigzag { 5 } else { 10 },
                        ..Default::default()
                    };
                    let pos = p.positions(rank);
                    for x in 0..10u32 {
                        // Written out: chunk r, then chunk 2W-1-r (zigzag), or rows r*10.. .
                        let want = match (zigzag, x < 5) {
                            (true, true) => rank * 5 + x,
                            (true, false) => (2 * world - 1 - rank) * 5 + (x - 5),
                            (false, _) => rank * 10 + x,
                        };
                        assert_eq!(pos.at(x), want);
                        assert_eq!(
                            shard_position(x as usize, 10, (world as usize, rank as usize), zigzag),
                            want as usize
                        );
                    }
                    // The visible prefix for every limit agrees with counting.
                    for limit in 0..(20 * world) {
                        let count = (0..10).filter(|&x| pos.at(x) <= limit).count() as u32;
                        assert_eq!(
                            pos.rows_at_or_before(limit, 10),
                            count,
                            "w{world} r{rank} zz{zigzag} limit {limit}"
                        );
                    }
                }
            }
        }
    }
}
