//! Every struct the host and the device both see: kernel parameter blocks (passed by value as the
//! kernel's single parameter) and records in shared buffers. `#[repr(C)]`, `Pod`, and a size
//! assert each, so a layout change is a compile error on both sides at once.
use bytemuck::{Pod, Zeroable};

macro_rules! abi_struct {
    ($(#[$m:meta])* pub struct $name:ident [$size:literal] { $($(#[$fm:meta])* pub $f:ident : $t:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
    };
}

/// B is `[K, N]` row-major (N-major: wgmma reads it transposed).
pub const B_KN: u32 = 0;
/// B is `[N, K]` row-major (K-major: the layout of a torch `Linear` weight).
pub const B_NK: u32 = 1;

abi_struct! {
    /// `y = a * x + y` over `n` f32 (the elementwise self-test).
    pub struct AxpyParams [32] {
        /// Device address of `x` (`n` f32).
        pub x: u64,
        /// Device address of `y` (`n` f32), updated in place.
        pub y: u64,
        /// Elements.
        pub n: u64,
        /// The scale.
        pub a: f32,
        /// Padding up to the asserted size; always 0.
        pub _pad: u32,
    }
}

abi_struct! {
    /// TMA round trip: box at (`c0`, `c1`) of `src_map` -> shared memory -> same box of `dst_map`;
    /// the raw shared-memory bytes (swizzled) are also copied to `raw_out`.
    pub struct TmaRoundTripParams [40] {
        /// Device address of the tensor map loaded from.
        pub src_map: u64,
        /// Device address of the tensor map stored through (same box shape).
        pub dst_map: u64,
        /// Device address receiving the box's `box_bytes` of shared memory as they are.
        pub raw_out: u64,
        /// Inner (contiguous) coordinate of the box, in elements.
        pub c0: i32,
        /// Outer coordinate of the box (row).
        pub c1: i32,
        /// Bytes of the box in shared memory: a multiple of 1024 (the mbarrier follows it).
        pub box_bytes: u32,
        /// 1: also store the box back through `dst_map`; 0: load only.
        pub store: u32,
    }
}

abi_struct! {
    /// One warpgroup tile product `out[64, n] (f32) = A[64, 64] @ B`, B per `b_layout`.
    pub struct WgmmaTileParams [32] {
        /// Device address of A's tensor map (`[64, 64]` bf16, 128-byte swizzle).
        pub a_map: u64,
        /// Device address of B's tensor map (`[64, n]` as K-major or N-major per `b_layout`).
        pub b_map: u64,
        /// Device address of `out`: `[64, n]` f32, row-major.
        pub out: u64,
        /// The wgmma N: 64, 128, 192, 224 or 256 (anything else runs as 256).
        pub n: u32,
        /// [`B_KN`] or [`B_NK`].
        pub b_layout: u32,
    }
}

abi_struct! {
    /// GPU <-> host flag handshake through host-mapped memory (system-scope acquire/release).
    pub struct HandshakeParams [64] {
        /// Device address of host-mapped `u32`s: `words` payload words, then the host's reply.
        pub host_data: u64,
        /// Device address of two host-mapped `u32` flags: `[0]` GPU -> host, `[1]` host -> GPU.
        pub host_flags: u64,
        /// Device address of `iters` `u32`: the host's reply of each round.
        pub out: u64,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on each wait for the host, in ns.
        pub timeout_ns: u64,
        /// Rounds.
        pub iters: u32,
        /// Payload words per round.
        pub words: u32,
        /// Round `i` uses epoch `base_epoch + i + 1`.
        pub base_epoch: u32,
        /// Seed of the payload ([`handshake_word`]).
        pub seed: u32,
    }
}

abi_struct! {
    /// The stream-wait probe (`bench::stream_wait`): thread 0 of CTA 0 raises `word` to 1, 2,
    /// ... `raises`, `period_ns` apart from its start, stamping the start and each raise (global
    /// timer, ns) into `stamps`; the other CTAs hold their SMs until the last raise, as a
    /// persistent kernel holds them.
    pub struct ProbeRaiseParams [24] {
        /// Device address of the `u32` raised (device or host-mapped memory).
        pub word: u64,
        /// Device address of `raises + 1` `u64`: the start, then each raise.
        pub stamps: u64,
        /// Raises.
        pub raises: u32,
        /// Nanoseconds between raises.
        pub period_ns: u32,
    }
}

/// Payload word `w` of handshake round `epoch` (the kernel writes it, the host test checks it).
pub const fn handshake_word(seed: u32, epoch: u32, w: u32) -> u32 {
    let mut x = seed ^ epoch.wrapping_mul(0x9e37_79b9) ^ w.wrapping_mul(0x85eb_ca6b);
    x ^= x >> 16;
    x = x.wrapping_mul(0x7feb_352d);
    x ^= x >> 15;
    x
}

abi_struct! {
    /// Each block writes its cluster coordinates to `out[blockIdx.x]`.
    pub struct ClusterIdsParams [8] {
        /// Device address of one `u32` per block:
        /// `cluster rank | cluster size << 8 | cluster id << 16`.
        pub out: u64,
    }
}

/// `WaitDiag::status`: nothing timed out.
pub const DIAG_OK: u32 = 0;
/// `WaitDiag::status`: a waiter is writing its record.
pub const DIAG_CLAIMED: u32 = 1;
/// `WaitDiag::status`: the record is complete.
pub const DIAG_TIMED_OUT: u32 = 2;

/// `WaitDiag::what`: a flag in memory (peer, host or device) did not reach the expected epoch.
pub const WAIT_FLAG: u32 = 1;
/// `WaitDiag::what`: an mbarrier's "full" phase (data loaded) never completed.
pub const WAIT_MBAR_FULL: u32 = 2;
/// `WaitDiag::what`: an mbarrier's "empty" phase (slot released) never completed.
pub const WAIT_MBAR_EMPTY: u32 = 3;
/// `WaitDiag::what`: an epilogue handoff between a consumer warpgroup and its helper thread
/// (`gemm::epilogue::Handoff`) never completed its phase.
pub const WAIT_MBAR_HANDOFF: u32 = 4;
/// `WaitDiag::what`: the proxy never released the FIFO up to `expected` (the low 32 bits of a
/// position; `seen`: where it stood): an earlier WRITE's source was still being read.
pub const WAIT_FIFO_RELEASED: u32 = 5;

/// Launch timelines (the device crate's `trace` feature, off in the product's module): the
/// stamps a traced launch leaves, their layout and the module's symbols the host reads.
pub mod trace {
    /// Stamps one module keeps (later ones are counted, not kept).
    pub const CAPACITY: u32 = 16384;
    /// Words per stamp: `epoch << 40 | event << 32 | cta`, `%globaltimer` (ns), `a << 32 | b`.
    pub const WORDS: u32 = 3;
    /// The epoch bits a stamp keeps (its low 24: launches 2^24 apart read alike).
    pub const EPOCH_MASK: u32 = (1 << 24) - 1;
    /// CTAs whose last warp's exit is counted ([`END`]); higher CTAs stamp no end.
    pub const MAX_CTAS: u32 = 1024;
    /// `u32` x 2: the first traced epoch and how many (the host writes them; 0 stamps none).
    pub const SELECT: &str = "MK_TRACE_SELECT";
    /// `u32`: stamps taken so far (kept while below [`CAPACITY`]).
    pub const COUNT: &str = "MK_TRACE_COUNT";
    /// `u64` x [`WORDS`] x [`CAPACITY`]: the stamps.
    pub const BUFFER: &str = "MK_TRACE_BUFFER";
    /// `u32` x [`MAX_CTAS`]: warps of each CTA that finished (the last resets it).
    pub const EXITS: &str = "MK_TRACE_EXITS";

    /// A CTA began (`a`: its role, `b`: the rank).
    pub const START: u32 = 1;
    /// A CTA ended (its last warp, or a comm role's thread 0 after its work).
    pub const END: u32 = 2;
    /// A compute CTA's producer claimed a tile (`a`: walk position, `b`: `m << 16 | n`).
    pub const TILE_CLAIMED: u32 = 3;
    /// The rows the tile reads are in (as [`TILE_CLAIMED`]).
    pub const TILE_READY: u32 = 4;
    /// A forward CTA saw a chunk arrive from another node (`a`: source rank, `b`: chunk).
    pub const CHUNK_SEEN: u32 = 5;
    /// The inter-send thread pushed its last WRITE (`a`: FIFO position through which it pushed).
    pub const SENT: u32 = 6;
    /// The proxy released every WRITE the inter-send thread pushed (as [`SENT`]).
    pub const RELEASED: u32 = 7;
    /// MoE: a router CTA counted its share of the routing and wrote its records (`a`: the CTA's
    /// router index).
    pub const ROUTED: u32 = 8;
    /// MoE: a router CTA shipped its share of the records to every node peer.
    pub const SHIPPED: u32 = 9;
    /// MoE: the layout is published (every peer's counts were in).
    pub const LAID_OUT: u32 = 10;
    /// MoE: this rank's tokens are in `x_heap` (`xready`).
    pub const X_READY: u32 = 11;
    /// MoE: a CTA finished pulling (`a`: 1 for a compute CTA whose first tile's rows are in,
    /// 0 for a pull CTA out of items).
    pub const PULLED: u32 = 12;
    /// GEMM + ReduceScatter / AllReduce: a consumer warpgroup waited for its own tile's partials
    /// (the helper's `ready`; `a`: walk position, `b`: ns waited).
    pub const SUM_WAITED: u32 = 13;
    /// GEMM + ReduceScatter / AllReduce: a consumer warpgroup waited for its staging tile, still
    /// read by the helper's copies of its previous tile (`free`; as [`SUM_WAITED`]).
    pub const STAGE_WAITED: u32 = 14;
    /// GEMM + ReduceScatter / AllReduce: an own tile's helper waited for its partials' flags
    /// (as [`SUM_WAITED`]).
    pub const PARTIALS_WAITED: u32 = 15;
    /// GEMM + ReduceScatter / AllReduce: a send tile's helper took this long from the staged
    /// partial to its flag at the owner (the owner's `ready`, the copy, its completion; as
    /// [`SUM_WAITED`]).
    pub const PARTIAL_SENT: u32 = 16;

    /// The epoch under which the plain GEMM stamps every launch (it counts none): select it
    /// around the launches to trace, with no launch of a counting kernel in between.
    pub const PLAIN_EPOCH: u32 = 1;

    /// Whether an event's `b` is a duration in ns (the summary adds them up).
    pub fn is_duration(event: u32) -> bool {
        matches!(event, SUM_WAITED | STAGE_WAITED | PARTIALS_WAITED | PARTIAL_SENT)
    }

    /// An event's name.
    pub fn name(event: u32) -> &'static str {
        match event {
            START => "start",
            END => "end",
            TILE_CLAIMED => "tile_claimed",
            TILE_READY => "tile_ready",
            CHUNK_SEEN => "chunk_seen",
            SENT => "sent",
            RELEASED => "released",
            ROUTED => "routed",
            SHIPPED => "shipped",
            LAID_OUT => "laid_out",
            X_READY => "x_ready",
            PULLED => "pulled",
            SUM_WAITED => "sum_waited",
            STAGE_WAITED => "stage_waited",
            PARTIALS_WAITED => "partials_waited",
            PARTIAL_SENT => "partial_sent",
            _ => "unknown",
        }
    }
}

abi_struct! {
    /// Who waited for what: written (once, by the first waiter that times out) into a buffer the
    /// host can read even after the kernel stopped. Any non-zero `status` also tells every other
    /// bounded wait of the launch to give up, so the kernel ends instead of hanging.
    pub struct WaitDiag [56] {
        /// [`DIAG_OK`], [`DIAG_CLAIMED`] or [`DIAG_TIMED_OUT`]; the other fields are valid only at
        /// `DIAG_TIMED_OUT`.
        pub status: u32,
        /// The waiting rank.
        pub rank: u32,
        /// The waiting CTA's role, a [`Role`](crate::sched::Role) as `u32`: 0 compute, 1
        /// intra-comm, 2 inter-send, 3 inter-reduce.
        pub role: u32,
        /// `blockIdx.x` of the waiting CTA.
        pub cta: u32,
        /// What the wait was about: a tile index, or a peer or chunk for communication roles.
        pub tile: u32,
        /// The kind of wait: [`WAIT_FLAG`], [`WAIT_MBAR_FULL`], [`WAIT_MBAR_EMPTY`],
        /// [`WAIT_MBAR_HANDOFF`] or [`WAIT_FIFO_RELEASED`].
        pub what: u32,
        /// The flag's address, or the mbarrier's shared-memory address.
        pub flag_addr: u64,
        /// The epoch the flag should have reached, or the mbarrier phase parity waited for.
        pub expected: u64,
        /// The flag's last value read (for an mbarrier: the other parity).
        pub seen: u64,
        /// How long the wait lasted before giving up, in ns (1024 ns resolution).
        pub waited_ns: u64,
    }
}

abi_struct! {
    /// Where a launch's bounded waits report: `record`, a [`WaitDiag`] in host-mapped memory (the
    /// host reads it even after the kernel stopped), and `abort`, a `u32` in device memory that the
    /// first waiter to give up sets, telling every other wait of the GPU to give up too (polled
    /// from device memory: tens of thousands of waiting threads reading host memory over PCIe
    /// would stall the whole memory system).
    pub struct Diag [16] {
        /// Device address of the host-mapped [`WaitDiag`]; 0: no report.
        pub record: u64,
        /// Device address of the abort `u32` (device memory); 0: waits never abort early.
        pub abort: u64,
    }
}

abi_struct! {
    /// How a persistent kernel's CTAs split into roles: CTAs `0..compute` compute, the next
    /// `intra_comm` copy over NVLink, then `inter_send` feed the proxy FIFO, then `inter_reduce`.
    pub struct RoleSplit [16] {
        /// CTAs that run the GEMM engine.
        pub compute: u32,
        /// CTAs that copy to this node's other ranks over NVLink.
        pub intra_comm: u32,
        /// CTAs that push FIFO commands for ranks on other nodes.
        pub inter_send: u32,
        /// CTAs that reduce data from other nodes (GEMM + ReduceScatter / AllReduce over
        /// several nodes).
        pub inter_reduce: u32,
    }
}

abi_struct! {
    /// The persistent GEMM: `C[m, n] = A[m, k] @ B`, bf16 in, f32 accumulate, bf16 (TMA store
    /// through `c_map`, or plain stores to `c`) or f32 (`c`) out.
    pub struct GemmParams [96] {
        /// Device address of A's tensor map (`[m, k]` bf16, 128-byte swizzle).
        pub a_map: u64,
        /// Device address of B's tensor map (`[k, n]` or `[n, k]`, per the kernel launched).
        pub b_map: u64,
        /// Device address of C's bf16 tensor map (encoded even for f32 output, then unused).
        pub c_map: u64,
        /// Device address of C `[m, n]`: f32 when `out_f32`, else bf16 (which the kernels with
        /// staging tiles store through `c_map`, the others straight from registers).
        pub c: u64,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on every device-side wait, in ns.
        pub timeout_ns: u64,
        /// Rows of A and C.
        pub m: u32,
        /// Columns of B and C.
        pub n: u32,
        /// The reduction dimension.
        pub k: u32,
        /// [`B_KN`] or [`B_NK`]. Informational: the kernel launched (`_kn` or `_nk`) fixes the
        /// layout.
        pub b_layout: u32,
        /// 1: f32 output; 0: bf16.
        pub out_f32: u32,
        /// Tile rows per group of the grouped raster order (L2 reuse).
        pub group_m: u32,
        /// The grid's CTA roles (a plain GEMM: compute only).
        pub roles: RoleSplit,
    }
}

abi_struct! {
    /// The split-K GEMM: `gemm` as for the plain GEMM, its tiles' k-blocks cut into `splits`
    /// units ([`crate::sched::SplitK`]). Each unit stores its f32 partial (one warpgroup's half
    /// tile, `kernels_info::gemm::split_half_bytes` of the kernel's tile width, in the
    /// accumulators' own layout) into
    /// `workspace[half][split]`, `half` = 2 x tile + warpgroup, then adds 1 to `counters[half]`,
    /// which only grows: launch `e` (from `launches`) is complete for a half when it reaches
    /// `e x splits`. With `parallel` (every unit has its own CTA, so all of a tile's units run at
    /// once) each unit waits for that and sums its own 1/splits of the half tile's chunks over
    /// the splits, storing them straight into C; otherwise the last unit to arrive sums the whole
    /// half and stores it. Either way the sum runs in split order: the same bits whichever unit
    /// finished last. A warpgroup whose rows all lie past M writes and counts nothing.
    pub struct SplitKParams [128] {
        /// The GEMM (tensor maps, shape, output).
        pub gemm: GemmParams,
        /// Device f32 scratch: `2 x tiles x splits` half tiles.
        pub workspace: u64,
        /// Device `u32` per half tile, zero before the first launch.
        pub counters: u64,
        /// Launch counter (device `u64`, zero before the first launch): the epoch.
        pub launches: u64,
        /// Units per output tile (2 or more).
        pub splits: u32,
        /// 1: every unit has its own CTA (see above).
        pub parallel: u32,
    }
}

abi_struct! {
    /// The gathered GEMM `C[i] = A[rows[i]] @ B`: `gemm` as for the plain GEMM (its `a_map` is
    /// unused, `m` counts rows of C), A's rows taken one by one from a table. A row index at or
    /// past `a_rows` (`u32::MAX` among them) makes a row of zeros; the first one that is not
    /// `u32::MAX` is reported in `errors` (`[1, i, rows[i], 0]`) and the row stays zero.
    pub struct GatherGemmParams [128] {
        /// The GEMM (B's and C's tensor maps, shape, output).
        pub gemm: GemmParams,
        /// Device address of A: `a_rows` rows of `gemm.k` bf16, 16-byte aligned, `a_stride`
        /// bytes apart (a multiple of 16).
        pub a: u64,
        /// Device address of `rows`: `gemm.m` u32 row indices of A.
        pub rows: u64,
        /// Device address of four u32: the first bad row index (see above), zero while none.
        pub errors: u64,
        /// Bytes from one row of A to the next.
        pub a_stride: u32,
        /// Rows of A.
        pub a_rows: u32,
    }
}

/// FIFO command opcodes (`FifoCmd::header` bits 0..8; 0 marks an empty slot).
pub const OP_WRITE: u64 = 1;
/// Raise a flag on a remote rank (no data).
pub const OP_SIGNAL: u64 = 2;
/// Ask the proxy to make every earlier command of this FIFO complete before later ones start
/// (for transports that reorder).
pub const OP_FENCE: u64 = 3;

/// The registered buffer id of the communicator's symmetric heap: every buffer a kernel names in
/// a FIFO command lives in it, at the same offset on every rank.
pub const BUF_HEAP: u64 = 0;

/// Bits of a 48-bit offset / 16-bit id word.
pub const OFFSET_BITS: u32 = 48;

abi_struct! {
    /// One GPU -> CPU command: 64 bytes, every field inside one 8-byte word. The device writes
    /// words 1..8 first, then `header` with a release store; the proxy acquires `header`, checks
    /// that its ticket is the one it expects (so a stale or half-written slot is never taken),
    /// reads the rest, clears `header`, and publishes the consumed position.
    ///
    /// header = op (8 bits) | flags (8) | dst_rank (16) | ticket (low 32 bits of the position)
    pub struct FifoCmd [64] {
        /// Op, flags, destination rank and ticket (see [`FifoCmd::header_word`]); 0: empty slot.
        pub header: u64,
        /// src buffer id (16) << 48 | src offset (48)
        pub src: u64,
        /// dst buffer id (16) << 48 | dst offset (48)
        pub dst: u64,
        /// Bytes to copy from `src` to `dst` (WRITE).
        pub bytes: u64,
        /// flag buffer id (16) << 48 | flag offset (48); raised after the data (WRITE, SIGNAL)
        pub flag: u64,
        /// value the flag is set to (an epoch)
        pub flag_value: u64,
        /// `%globaltimer` at push (diagnostics)
        pub pushed_ns: u64,
        /// Reserved; always 0.
        pub _reserved: u64,
    }
}

impl FifoCmd {
    /// Pack a header word.
    pub const fn header_word(op: u64, flags: u64, dst_rank: u32, ticket: u64) -> u64 {
        (op & 0xff) | ((flags & 0xff) << 8) | ((dst_rank as u64 & 0xffff) << 16) | ((ticket & 0xffff_ffff) << 32)
    }
    /// Pack a buffer id and offset.
    pub const fn loc(buf: u64, offset: u64) -> u64 {
        (buf << OFFSET_BITS) | (offset & ((1 << OFFSET_BITS) - 1))
    }
    /// The opcode ([`OP_WRITE`], [`OP_SIGNAL`], [`OP_FENCE`]; 0: empty slot).
    pub const fn op(&self) -> u64 {
        self.header & 0xff
    }
    /// The destination rank (where the data is written and the flag raised).
    pub const fn dst_rank(&self) -> u32 {
        ((self.header >> 16) & 0xffff) as u32
    }
    /// Low 32 bits of the slot's ticket (its position in the FIFO's order).
    pub const fn ticket(&self) -> u32 {
        (self.header >> 32) as u32
    }
    /// Split a packed location into (buffer id, offset).
    pub const fn split(loc: u64) -> (u64, u64) {
        (loc >> OFFSET_BITS, loc & ((1 << OFFSET_BITS) - 1))
    }
}

abi_struct! {
    /// Where a GPU finds its FIFO: the ring (host-mapped, `capacity` commands, a power of two),
    /// the head counter (device memory, claimed with atomics), the consumed position the proxy
    /// publishes (host-mapped), a device-memory cache of it (read over PCIe only when the
    /// ring looks full), and the released position (host-mapped).
    pub struct FifoParams [48] {
        /// Device address of the ring: `capacity` slots of 8 `u64` (host-mapped).
        pub ring: u64,
        /// Device address of the next ticket, a `u64` in device memory.
        pub head: u64,
        /// Device address of the consumed position the proxy publishes (host-mapped `u64`).
        pub tail: u64,
        /// Slots in the ring (a power of two).
        pub capacity: u64,
        /// Device address of the last `tail` value read, a `u64` in device memory.
        pub tail_cache: u64,
        /// Device address of the released position the proxy publishes (host-mapped `u64`): every
        /// command with a lower ticket has read its source (a WRITE's bytes are on their way or
        /// landed), so its source may be rewritten. A kernel that pushed WRITEs waits for it
        /// (`fifo_quiet`, device `comm::fifo`) before it ends, so that the caller may rewrite its
        /// inputs, and its next launch its buffers, once the launch is done.
        pub released: u64,
    }
}

/// Most ranks on one node the intra-node path handles.
pub const MAX_LOCAL_RANKS: usize = 8;

/// `table[i]` for a per-local-rank table of a parameter block, read without a run-time index: a
/// dynamic index into a kernel parameter makes the compiler copy the whole block to local memory.
/// 0 for `i` out of range.
#[inline(always)]
pub const fn pick(table: &[u64; MAX_LOCAL_RANKS], i: u32) -> u64 {
    let mut r = 0;
    let mut j = 0;
    while j < MAX_LOCAL_RANKS {
        if j as u32 == i {
            r = table[j];
        }
        j += 1;
    }
    r
}

abi_struct! {
    /// GPU-driven all-gather: rank r's `shard_bytes` of `input` land at `r * shard_bytes` in every
    /// rank's symmetric `output`; then the kernel waits until every other rank's shard arrived.
    /// `input`, `output` and `flags` live in the communicator's heap (their `*_heap_off` are
    /// their offsets there, which FIFO commands carry).
    pub struct AllGatherParams [384] {
        /// Device address of this rank's shard (`shard_bytes`; its slice of `output` when in
        /// place).
        pub input: u64,
        /// Device address of this rank's output: `world * shard_bytes`, shard s at
        /// `s * shard_bytes`.
        pub output: u64,
        /// My flags: u32 epochs, `data[world]` (rank s's shard arrived), `ready[world]` (rank s
        /// entered this launch), then `taken[world]` (with [`COPY_PULL`]: rank s is done reading
        /// my shard).
        pub flags: u64,
        /// Device addresses of each local rank's `output` (index: local rank).
        pub peer_output: [u64; 8],
        /// Device addresses of each local rank's shard (its `input`), read with [`COPY_PULL`].
        pub peer_input: [u64; 8],
        /// Device addresses of each local rank's flag buffer.
        pub peer_flags: [u64; 8],
        /// Completion counters (device memory, never reset: see the kernel): `2 * local_world`,
        /// per place pushed to, then per source pulled from.
        pub counters: u64,
        /// Launch counter (device `u64`): gives each launch its epoch.
        pub launches: u64,
        /// The communicator's FIFO (the inter-send CTA pushes into it).
        pub fifo: FifoParams,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on every device-side wait, in ns.
        pub timeout_ns: u64,
        /// Bytes of each rank's shard.
        pub shard_bytes: u64,
        /// Bytes per FIFO WRITE command (0: the whole shard in one).
        pub chunk_bytes: u64,
        /// Heap offset of `input`.
        pub input_heap_off: u64,
        /// Heap offset of `output`.
        pub output_heap_off: u64,
        /// Heap offset of `flags`.
        pub flags_heap_off: u64,
        /// This rank.
        pub rank: u32,
        /// Ranks in the world.
        pub world: u32,
        /// This rank's index on its node.
        pub local_rank: u32,
        /// Ranks per node (at most [`MAX_LOCAL_RANKS`]).
        pub local_world: u32,
        /// The grid: `intra_comm` copy CTAs, and one inter-send CTA with several nodes.
        pub roles: RoleSplit,
        /// How intra-comm CTAs move bytes: [`COPY_LSU`], [`COPY_BULK`], [`COPY_FAN`] or
        /// [`COPY_PULL`]; or which end of the copy engines' copies this launch is
        /// ([`COPY_CE_ENTER`], [`COPY_CE_LEAVE`]: one intra-comm CTA, which moves nothing).
        pub copy_mode: u32,
        /// 1: `input` is this rank's slice of `output` (nothing to copy locally).
        pub in_place: u32,
    }
}

abi_struct! {
    /// AllGather + GEMM: `C[M, N] = allgather(A)[M, K] @ B` in one launch. Rank r's shard
    /// `A_r[shard_rows, K]` lands at rows `r * shard_rows ..` of every rank's `gathered` (the
    /// communicator's heap); compute CTAs run `gemm` (its `a_map` reads `gathered`) in the order of
    /// `row_order`, each tile first waiting for the arrival flags of exactly the chunks of rows it
    /// needs. Flags (u32 epochs, see [`AgGemmParams::ready_flag`] / [`AgGemmParams::data_flag`]):
    /// `ready[s]` = rank s entered this launch (its `gathered` may be overwritten), then
    /// `data[s][c]` = chunk c of rank s's shard is in this rank's `gathered`.
    pub struct AgGemmParams [480] {
        /// The GEMM over `gathered`; its `roles` split the grid into compute, intra-comm (push,
        /// then `fwd_ctas` forward) and inter-send CTAs.
        pub gemm: GemmParams,
        /// My gathered A `[M, K]`.
        pub gathered: u64,
        /// Each local rank's `gathered`, mapped here (index: local rank).
        pub peer_gathered: [u64; 8],
        /// My flags.
        pub flags: u64,
        /// Each local rank's flags, mapped here.
        pub peer_flags: [u64; 8],
        /// My shard `[shard_rows, K]` (inside `gathered` when `in_place`).
        pub shard_src: u64,
        /// Tensor map of `shard_src` (not in place): tiles whose rows are all this rank's are
        /// loaded from it, never waiting for the local copy into `gathered`.
        pub a_local_map: u64,
        /// `m_tiles` u32: the tile row walked at each schedule position.
        pub row_order: u64,
        /// Launch counter (device `u64`): gives each launch its epoch.
        pub launches: u64,
        /// Two device `u32`, zero between launches, from which the compute CTAs (and with `join`
        /// the intra-comm CTAs) claim tiles (`sched::Claimed`).
        pub tile_counters: u64,
        /// The communicator's FIFO (the inter-send CTA pushes into it).
        pub fifo: FifoParams,
        /// Heap offsets of `gathered` and `flags` (what FIFO commands carry).
        pub gathered_heap_off: u64,
        /// Heap offset of `flags`.
        pub flags_heap_off: u64,
        /// Rows of A each rank holds: `M / world`.
        pub shard_rows: u32,
        /// Rows per arrival flag.
        pub chunk_rows: u32,
        /// Chunks per shard: `ceil(shard_rows / chunk_rows)`.
        pub chunks: u32,
        /// This rank.
        pub rank: u32,
        /// Ranks in the world.
        pub world: u32,
        /// This rank's index on its node.
        pub local_rank: u32,
        /// Ranks per node (at most [`MAX_LOCAL_RANKS`]).
        pub local_world: u32,
        /// 1: the caller wrote its shard straight into `gathered` (no local copy).
        pub in_place: u32,
        /// The last `fwd_ctas` intra-comm CTAs forward shards that came from other nodes to this
        /// node's other ranks (hierarchical: a shard crosses the network once per node).
        pub fwd_ctas: u32,
        /// 1: no compute CTAs; the first intra-comm CTA waits until every chunk arrived (the
        /// all-gather alone, with the fused kernel's own communication).
        pub comm_only: u32,
        /// 1: push CTAs copy the shard into this rank's own `gathered` after pushing it to the
        /// peers (compute reads local rows from `a_local_map`); 0: chunk by chunk before the
        /// pushes (the inter-node path sends from that copy).
        pub local_copy_last: u32,
        /// 1: the compute tiles whose rows are all this rank's write those rows into `gathered`
        /// from shared memory as they load them, each tile of a tile row its share of the
        /// k-blocks ([`AgGemmParams::tiled_rows`]);
        /// the push CTAs' local copy then covers only the shard's rows outside such tiles.
        pub tiles_copy_local: u32,
        /// 1: a push item is a chunk for every other local rank at once, each piece loaded once
        /// and stored to all of them (`comm::nvlink::copy_fan`); 0: one item per chunk and rank.
        pub fan: u32,
        /// 1: intra-comm CTAs claim tiles too once their copies are done (the compute CTAs
        /// alone would leave their SMs idle for the rest of the launch); 0: they stop.
        pub join: u32,
        /// K-blocks before a tile's last load at which its producer claims the next tile
        /// (`sched::TileScheduler::claim_ahead`).
        pub claim_ahead: u32,
        /// 1: the compute CTAs (and with `join` the intra-comm ones) claim tiles from
        /// `tile_counters`; 0: compute CTA `i` walks tiles `i, i + compute, ...`.
        pub dynamic: u32,
        /// A static walk with `join`: the schedule position (a multiple of the compute CTAs)
        /// from which the intra-comm CTAs share the tiles (`sched::TileIter::joined`); before
        /// it the compute CTAs walk alone.
        pub join_at: u32,
        /// Schedule positions taken as whole tiles (`sched::TailSplit::dp`): the tiles past them
        /// (past the claiming CTAs' last full wave) are cut into k-ranges over all of them, their
        /// f32 partials summed through `tail_workspace`; every tile when there is no tail.
        pub tail_dp: u32,
        /// `[2 x tail tiles][slots]` f32 half tiles (`sched::TailSplit`'s slots).
        pub tail_workspace: u64,
        /// `2 x tail tiles` u32 arrival counters, zero between launches.
        pub tail_counters: u64,
        /// With `spread`: a u32 per chunk, [`FLAG_STRIDE`] apart, counting the units of the
        /// chunk copied this launch (the last sets it back to zero).
        pub spread_counters: u64,
        /// 1: the spare warps of every `spread_every`-th compute CTA copy units
        /// ([`AgGemmParams::spread_unit_range`]) of the chunks the push CTAs leave
        /// ([`AgGemmParams::pushed_chunks`]) into every local rank's `gathered` (its own too,
        /// unless in place), the last unit of a chunk raising the chunk's flag on each.
        pub spread: u32,
        /// Bytes per unit with `spread` (a multiple of 16).
        pub spread_unit: u32,
        /// With `spread`: only compute CTAs `0, every, 2 * every, ...` copy.
        pub spread_every: u32,
        /// With `spread`: the push CTAs copy every `spread_push_every`-th chunk (from chunk 0),
        /// the spread copies the rest; 0: no push CTA copies.
        pub spread_push_every: u32,
        /// With `spread`: units of a whole chunk, of the last chunk, and the copying CTAs
        /// (`ceil(compute / spread_every)`): counted on the host ([`AgGemmParams::plan_spread`]),
        /// so the side threads divide by nothing but the first.
        pub spread_chunk_full: u32,
        /// See `spread_chunk_full`.
        pub spread_chunk_last: u32,
        /// See `spread_chunk_full`.
        pub spread_ctas: u32,
        /// The k-ranges the tail is cut into (`sched::StreamK::ctas`): 0 for a stream-K tail
        /// over the claiming CTAs (a last partial wave spread over all of them); for the arrival
        /// tail (`tail_rows` > 0), its tiles times the ways each is cut.
        pub tail_ranges: u32,
        /// The arrival tail: the walk's last `tail_rows` tile rows (with several nodes the rows
        /// that land last) walked one after another after the grouped rest
        /// (`sched::RowOrder::tail_rows`), their tiles cut into `tail_ranges` k-ranges; 0: none.
        pub tail_rows: u32,
        /// 1: the copy engines move this rank's shard into every local rank's `gathered` (its
        /// own too, unless in place) between launches of [`AgEngineParams`] on a side stream,
        /// which raise `ready` and the chunks' flags; the kernel has no push CTAs (a comm-only
        /// launch's one intra-comm CTA only waits for every chunk).
        pub engines: u32,
    }
}

/// [`AgEngineParams::step`]: raise this rank's `ready` at every local peer, wait (bounded) for
/// theirs, and publish the launch's epoch for the flag steps; a wait that gives up stops the
/// context, so no copy queued behind it writes into a rank that never entered.
pub const AG_ENGINE_ENTER: u32 = 0;
/// [`AgEngineParams::step`]: the copy engines' copy of chunks `first..end` into `peer`'s
/// `gathered` completed (stream order): raise their `data[rank]` flags there.
pub const AG_ENGINE_FLAGS: u32 = 1;

abi_struct! {
    /// One step of AllGather + GEMM's copy-engine gather ([`AgGemmParams::engines`]), a one-CTA
    /// launch on the op's side stream: [`AG_ENGINE_ENTER`] first, then the copies, each piece
    /// followed by [`AG_ENGINE_FLAGS`].
    pub struct AgEngineParams [512] {
        /// The fused launch's parameters (flags, peers, shard layout, bound).
        pub ag: AgGemmParams,
        /// The enter step's launch counter (a device `u64`; its count is the fused launches').
        pub launches: u64,
        /// Where the enter step leaves the launch's epoch for the flag steps after it (a device
        /// `u32`).
        pub epoch: u64,
        /// [`AG_ENGINE_ENTER`] or [`AG_ENGINE_FLAGS`].
        pub step: u32,
        /// The flag step's local rank (this rank's own for its own `gathered`).
        pub peer: u32,
        /// The flag step's chunks: `first..end`.
        pub first: u32,
        /// See `first`.
        pub end: u32,
    }
}

/// `x` limited to `lo..=hi` (a `const` `clamp`).
const fn clamp_u64(x: u64, lo: u64, hi: u64) -> u64 {
    if x < lo {
        lo
    } else if x > hi {
        hi
    } else {
        x
    }
}

/// u32 words between two flags of a fused op: one flag per 128-byte line, so many CTAs polling
/// different flags do not all hit one L2 line.
pub const FLAG_STRIDE: u32 = 32;

impl AgGemmParams {
    /// Flag words per rank: `ready[world]` then `data[world][chunks]`, [`FLAG_STRIDE`] apart;
    /// `None` past 32 bits (the kernels index the flags in u32 words).
    pub const fn flag_words(world: u32, chunks: u32) -> Option<u32> {
        match chunks.checked_add(1) {
            Some(c) => match world.checked_mul(c) {
                Some(f) => f.checked_mul(FLAG_STRIDE),
                None => None,
            },
            None => None,
        }
    }
    /// Index of `ready[s]`.
    pub const fn ready_flag(s: u32) -> u32 {
        s * FLAG_STRIDE
    }
    /// Index of `data[s][c]`.
    pub const fn data_flag(&self, s: u32, c: u32) -> u32 {
        (self.world + s * self.chunks + c) * FLAG_STRIDE
    }
    /// Bytes of one row of A.
    pub const fn row_bytes(&self) -> u64 {
        self.gemm.k as u64 * 2
    }
    /// Rows of chunk `c` within a shard: `[first, end)`.
    pub const fn chunk_rows_range(&self, c: u32) -> (u32, u32) {
        let first = c * self.chunk_rows;
        let end = first + self.chunk_rows;
        (first, if end < self.shard_rows { end } else { self.shard_rows })
    }
    /// Byte range of chunk `c` within a shard.
    pub const fn chunk_bytes_range(&self, c: u32) -> (u64, u64) {
        let (a, b) = self.chunk_rows_range(c);
        (a as u64 * self.row_bytes(), b as u64 * self.row_bytes())
    }
    /// True when every row of tile row `tm` is this rank's and read from `a_local_map`.
    pub const fn tile_is_local(&self, tm: u32, tile_m: u32) -> bool {
        let first = tm * tile_m;
        let end = first + tile_m;
        let mine = self.rank * self.shard_rows;
        self.in_place == 0 && first >= mine && end <= mine + self.shard_rows
    }
    /// The rows of this rank's shard (shard-relative, `[first, end)`) that lie in tile rows of
    /// `tile_m` entirely inside the shard: what [`AgGemmParams::tiles_copy_local`] leaves to
    /// the compute tiles. Empty (`first == end`) when no tile row fits.
    pub const fn tiled_rows(&self, tile_m: u32) -> (u32, u32) {
        let mine = self.rank * self.shard_rows;
        let first = mine.div_ceil(tile_m) * tile_m;
        let end = (mine + self.shard_rows) / tile_m * tile_m;
        if end > first {
            (first - mine, end - mine)
        } else {
            (0, 0)
        }
    }
    /// The byte ranges of chunk `c` a push CTA copies into this rank's own `gathered` (the
    /// chunk's rows before and after [`AgGemmParams::tiled_rows`] when the compute tiles write
    /// those; the whole chunk otherwise). Either range may be empty (`start == end`).
    pub const fn local_copy_parts(&self, c: u32, tile_m: u32) -> [(u64, u64); 2] {
        let (lo, hi) = self.chunk_bytes_range(c);
        let (t0, t1) = if self.tiles_copy_local != 0 { self.tiled_rows(tile_m) } else { (0, 0) };
        let (t0, t1) = (t0 as u64 * self.row_bytes(), t1 as u64 * self.row_bytes());
        if t1 <= t0 {
            return [(lo, hi), (hi, hi)];
        }
        [(lo, clamp_u64(t0, lo, hi)), (clamp_u64(t1, lo, hi), hi)]
    }
    /// With [`AgGemmParams::tiles_copy_local`]: the k-blocks the tile at tile row `tm`, column
    /// `tn` (tiles of `tile_m` x `tile_n`) writes into `gathered`, as `(first, stride)`: those
    /// with `kb % stride == first`. The tiles of a local tile row share its k-blocks out, each
    /// written once. `None`: the tile writes nothing.
    pub const fn local_copy_share(&self, tm: u32, tn: u32, tile_m: u32, tile_n: u32) -> Option<(u32, u32)> {
        if self.tiles_copy_local != 0 && self.tile_is_local(tm, tile_m) {
            Some((tn, self.gemm.n.div_ceil(tile_n)))
        } else {
            None
        }
    }
    /// With [`AgGemmParams::spread`]: count the units of a chunk (`spread_unit` bytes each, the
    /// last one shorter) and the copying CTAs among `compute`, into the `spread_chunk_*` and
    /// `spread_ctas` fields (the host, before launching).
    pub fn plan_spread(&mut self, compute: u32) {
        let units = |p: &Self, c: u32| {
            let (lo, hi) = p.chunk_bytes_range(c);
            (hi - lo).div_ceil(p.spread_unit.max(1) as u64) as u32
        };
        self.spread_chunk_full = units(self, 0);
        self.spread_chunk_last = units(self, self.chunks.saturating_sub(1));
        self.spread_ctas = compute.div_ceil(self.spread_every.max(1));
    }
    /// With [`AgGemmParams::spread`]: the units chunk `c` is copied in.
    pub const fn spread_chunk_units(&self, c: u32) -> u32 {
        if c + 1 == self.chunks {
            self.spread_chunk_last
        } else {
            self.spread_chunk_full
        }
    }
    /// Chunks the push CTAs copy: every chunk, or with `spread` every `spread_push_every`-th
    /// (from chunk 0; none when 0).
    pub const fn pushed_chunks(&self) -> u32 {
        if self.spread == 0 {
            self.chunks
        } else if self.spread_push_every == 0 {
            0
        } else {
            self.chunks.div_ceil(self.spread_push_every)
        }
    }
    /// The `i`-th chunk the push CTAs copy.
    pub const fn pushed_chunk(&self, i: u32) -> u32 {
        if self.spread == 0 {
            i
        } else {
            i * self.spread_push_every
        }
    }
    /// The `j`-th chunk the spread copies take: those the push CTAs leave, in order.
    pub const fn spread_chunk(&self, j: u32) -> u32 {
        let k = self.spread_push_every;
        if k < 2 {
            j
        } else {
            j + j / (k - 1) + 1
        }
    }
    /// Units of the spread copies: every chunk but the last has as many as the first.
    pub const fn spread_units(&self) -> u32 {
        let n = self.chunks - self.pushed_chunks();
        if n == 0 {
            return 0;
        }
        (n - 1) * self.spread_chunk_units(0) + self.spread_chunk_units(self.spread_chunk(n - 1))
    }
    /// Unit `u` (chunk-major, below [`AgGemmParams::spread_units`]): its chunk and its byte
    /// range within the shard.
    pub const fn spread_unit_range(&self, u: u32) -> (u32, u64, u64) {
        let per = self.spread_chunk_full;
        if per == 0 {
            return (0, 0, 0); // not planned: nothing to copy
        }
        let j = u / per;
        let c = self.spread_chunk(j);
        let (lo, hi) = self.chunk_bytes_range(c);
        let start = lo + (u - j * per) as u64 * self.spread_unit as u64;
        let end = start + self.spread_unit as u64;
        (c, start, if end < hi { end } else { hi })
    }
    /// Byte offset of rank `s`'s shard in `gathered`.
    pub const fn shard_offset(&self, s: u32) -> u64 {
        s as u64 * self.shard_rows as u64 * self.row_bytes()
    }
}

abi_struct! {
    /// GEMM + ReduceScatter / AllReduce in one launch. Rank r holds `A_r[M, K/W]` (`gemm.a_map`,
    /// `gemm.k` = K/W) and `B_r`; the output rows are split into `world` blocks of `rows`, one
    /// per owner ([`crate::sched::OwnerTiles`]).
    ///
    /// **One node** (`nodes` = 1, `mk_gemm_rs_{kn,nk}`): a tile owned by another rank is rounded
    /// to bf16 and written, in the accumulators' own layout, into the owner's `staging` slot for
    /// this source (`push`), or into this rank's outbox for the owner to pull (with `prefetch`,
    /// right after the owner sent it the same tile of this rank's block), then flagged; the
    /// owner sums every source's partial in rank order (fp32) when it reaches its own tile and
    /// stores the result into its output block (`all_reduce`: into the same block of every
    /// rank's output, then flags it there).
    ///
    /// **One-shot all-reduce** (`one_shot`, one node): every rank walks every tile in the same
    /// order, pushes its bf16 partial of each into the inbox slot `[me][q * per_owner + slot]`
    /// of every other rank and flags it, then sums all of the tile's partials itself (the same
    /// order as above: q's first, then the others in rank order) into its own output, whose
    /// blocks the `out_maps` / [`PeerTable`] `out` entries then cover (entry q: block q).
    ///
    /// **Several nodes** (`mk_gemm_rs_nodes_{kn,nk}`, see [`crate::sched::NodeMap`] and
    /// [`crate::sched::NodeTiles`]): the same NVLink protocol runs inside each node with the
    /// block's *collector* (the rank of this node with the block's local index, `q % local_world`)
    /// in the owner's place: it sums its node's partials of each block it collects (its own
    /// first, then local rank order, fp32), rounds the node partial to bf16 once and bulk-stores
    /// it into its `nodebox[qi][node]` (`qi` = the block's node), raising its own node flag. Its
    /// inter-send CTAs push each group of `group` finished tiles as ONE FIFO WRITE from there to
    /// the same offset of every rank that needs it ([`crate::sched::NodeMap::dest`]: reduce-scatter,
    /// the block's owner; all-reduce, the collector of the block on every other node), the WRITE's
    /// flag (epoch-valued) being the node flag of the group's last half tile there. Its
    /// inter-reduce CTAs wait, per half tile of each block it finalises (reduce-scatter: its own;
    /// all-reduce: every block it collects), for every node's flag, add the node partials in
    /// node order (fp32) and store the result: into its output, and for the all-reduce into every
    /// local rank's output over NVLink, flagging `done` there. Every node partial crosses the
    /// inter-node link once per destination node; the all-reduce's every node finalises each
    /// block itself from the same bf16 values in the same order, so all ranks hold the same bits.
    ///
    /// Before writing into a rank's buffers, a writer waits for that rank's `ready` of the launch
    /// (raised over NVLink, or by a FIFO SIGNAL from another node); a node-partial slot that the
    /// last launch sent from is rewritten only after its destinations' `ready`, which implies
    /// they received it. Flags: see the index functions.
    pub struct GemmRsParams [272] {
        /// This rank's partial GEMM `A_r @ B_r` (`k` = K/W; compute CTAs only; `roles` also
        /// counts the inter-send and inter-reduce CTAs of several nodes).
        pub gemm: GemmParams,
        /// My staging: the inbox `[source][inbox tiles][2 halves]` of [`HALF_TILE_BYTES`],
        /// then (when owners pull) the outbox `[owner][tiles per owner][2 halves]`, then (several
        /// nodes) the node partials `[qi][node][half tiles in walk order]`.
        pub staging: u64,
        /// My flags.
        pub flags: u64,
        /// A [`PeerTable`] in device memory: where each local rank's staging, flags and output
        /// block are mapped here (read with a run-time index, from global memory: kept in the
        /// parameters, the compiler would hold every entry in registers the consumers need).
        pub peers: u64,
        /// `MAX_LOCAL_RANKS` tensor maps (128 bytes each): entry d covers my row block of local
        /// rank d's bf16 output (`[rows, N]`); only my own entry is used for a reduce-scatter
        /// (one node only). One shot: entry q covers block q of my own output.
        pub out_maps: u64,
        /// Launch counter (device `u64`): gives each launch its epoch.
        pub launches: u64,
        /// Rows per owner block (`M / world`).
        pub rows: u32,
        /// This rank.
        pub rank: u32,
        /// Ranks in the world.
        pub world: u32,
        /// This rank's index on its node.
        pub local_rank: u32,
        /// Ranks per node (at most [`MAX_LOCAL_RANKS`]).
        pub local_world: u32,
        /// 1: every rank gets the whole sum (all-reduce); 0: each its own block.
        pub all_reduce: u32,
        /// Rounds of sends before the first collected tile: of an own tile on one node
        /// ([`crate::sched::OwnerTiles`]), in each half of the walk over several nodes
        /// ([`crate::sched::NodeTiles`]).
        pub lead: u32,
        /// Nodes (`world / local_world`).
        pub nodes: u32,
        /// The communicator's FIFO (several nodes: the inter-send CTAs push into it).
        pub fifo: FifoParams,
        /// Heap offset of `staging` (what FIFO commands carry).
        pub staging_heap_off: u64,
        /// Heap offset of `flags`.
        pub flags_heap_off: u64,
        /// Tiles per FIFO WRITE of a node partial (several nodes; at least 1).
        pub group: u32,
        /// 1: one-shot all-reduce (one node): every rank pushes its partial of every tile to
        /// every other rank and sums every tile itself, so only partials cross NVLink and no
        /// tile waits for a second hop (see `kernels::gemm_rs`). 0: two phases.
        pub one_shot: u32,
        /// 1: sources push their partials into the owner's inbox (one node; the all-reduce's
        /// collectors across nodes always receive them so) instead of owners pulling them from
        /// the sources' outboxes.
        pub push: u32,
        /// 1 (one node, two phases, owners pulling): each send tile's helper, once the tile is
        /// in the outbox, pulls the same tile of this rank's own block from the block's owner
        /// (that rank computes it in the same round) into the inbox and raises this rank's own
        /// `pref` flag for it; an own tile then waits for those flags instead of pulling. The
        /// reads move from the own tiles' part of the launch to the sends' part, where the
        /// all-reduce's second phase does not write.
        pub prefetch: u32,
        /// 1 (two-phase all-reduce, one node, bf16 output): each rank pulls the other ranks'
        /// reduced tiles instead of their owners pushing them. An own tile's helper stores the
        /// sum into its own output, raises `done[rank]` at every other local rank, then (each
        /// other rank sums the same tile of its block in the same round) waits for their
        /// `done`, loads their tile over NVLink with TMA into its staging tile, stores it into
        /// its own output and raises `ack[rank]` at them; a rank's launch ends once every other
        /// rank acknowledged every tile of its block (nobody reads its output any more). The
        /// entries `MAX_LOCAL_RANKS + d` of `out_maps` cover local rank d's block of its own
        /// output, entries `2 * MAX_LOCAL_RANKS + d` the same block of mine. NVLink reads slow
        /// the GEMM about half as much as writes of the same bytes.
        pub pull_reduced: u32,
        /// Nanoseconds between the first two tiles' sends of CTAs `i % 8` apart (0: none). Each
        /// CTA's first tiles finish together and, with every first-wave tile a send, their
        /// copies left at once, saturating the links while the next tiles' loads waited; a send
        /// tile's helper at a CTA's first two tiles waits `(CTA % 8) * stagger_ns` first.
        pub stagger_ns: u32,
        /// 0, or (one node, two phases, pushed) the copy engines move what crosses NVLink: the
        /// device `u32` band counters ([`Self::engine_count`]). A send tile's helper stores the
        /// partial into my outbox instead of the owner's inbox, raises my own mirror of the
        /// owner's `part` flag for it ([`Self::part_mirror`]) and counts the half tile on its
        /// band's counter (one for every owner's band `b`); a stream of the host's waits (a
        /// stream memory operation) for each band's count, sets it back to zero, and copies
        /// each owner's band of partials into its inbox, then the band's mirrored flags behind
        /// them. The all-reduce's own tiles likewise: stored into my output, mirrored in
        /// `done[me]` and counted, the band then copied into each peer's output with its flags.
        /// The owners wait on the same flags as when sources push.
        pub engine_counts: u64,
        /// With the copy engines, the all-reduce's last bands of my block that the helpers push
        /// into the other ranks' outputs themselves, as without them (at the launch's end a
        /// band's copy behind a stream wait is a tail no tile hides; the GEMM is about done).
        pub engine_tail: u32,
        /// Padding up to the asserted size; always 0.
        pub _pad: u32,
    }
}

abi_struct! {
    /// Addresses of each local rank's buffers as mapped in this process (index: local rank).
    pub struct PeerTable [192] {
        /// Its staging slots.
        pub staging: [u64; 8],
        /// Its flags.
        pub flags: [u64; 8],
        /// The start of my row block in its output (one shot: entry q, the start of block q in
        /// mine).
        pub out: [u64; 8],
    }
}

/// Bytes of one half tile (64 rows x 256 columns of bf16) in a staging slot.
pub const HALF_TILE_BYTES: u32 = 64 * 256 * 2;

impl GemmRsParams {
    /// Tiles per owner block.
    pub const fn per_owner(rows: u32, n: u32) -> u32 {
        rows.div_ceil(crate::kernels_info::gemm::TILE_M) * n.div_ceil(crate::kernels_info::gemm::TILE_N)
    }
    /// Tiles per source in the inbox: a block's (its owner sums it), or, one-shot, every
    /// block's (every rank sums every tile; see [`Self::inbox_slot`]).
    pub const fn inbox_tiles_of(world: u32, per_owner: u32, one_shot: bool) -> u32 {
        if one_shot {
            world * per_owner
        } else {
            per_owner
        }
    }
    /// Flag words per rank: `ready[world]`, `part[world][inbox tiles][2]`,
    /// `done[world][inbox tiles][2]`, with several nodes `node[nodes][nodes][2 tiles]`, on one
    /// node `pref[world][inbox tiles][2]` and `ack[world][inbox tiles][2]` (`inbox_tiles`:
    /// [`Self::inbox_tiles_of`]).
    pub const fn flag_words(world: u32, nodes: u32, per_owner: u32, inbox_tiles: u32) -> u32 {
        let node = if nodes > 1 { nodes * nodes * 2 * per_owner } else { 4 * world * inbox_tiles };
        (world + 4 * world * inbox_tiles + node) * FLAG_STRIDE
    }
    fn tiles(&self) -> u32 {
        Self::per_owner(self.rows, self.gemm.n)
    }
    /// Tiles per source in my inbox ([`Self::inbox_tiles_of`]).
    pub fn inbox_tiles(&self) -> u32 {
        Self::inbox_tiles_of(self.world, self.tiles(), self.one_shot != 0)
    }
    /// The inbox slot of block q's tile `slot`: `slot` itself where only q's summing rank
    /// receives it, `q * per_owner + slot` one-shot.
    pub fn inbox_slot(&self, q: u32, slot: u32) -> u32 {
        if self.one_shot != 0 {
            q * self.tiles() + slot
        } else {
            slot
        }
    }
    /// Index of `ready[s]`: rank s entered this launch.
    pub const fn ready_flag(s: u32) -> u32 {
        s * FLAG_STRIDE
    }
    /// Index of `part[s][slot][half]`: source s's partial of my inbox slot `slot`
    /// ([`Self::inbox_slot`]) is in my staging (several nodes: `s` = [`GemmRsParams::inbox`]).
    pub fn part_flag(&self, s: u32, slot: u32, half: u32) -> u32 {
        (self.world + (s * self.inbox_tiles() + slot) * 2 + half) * FLAG_STRIDE
    }
    /// Index of `done[q][slot][half]`: block q's final tile `slot` is in my output (two-phase
    /// all-reduce).
    pub fn done_flag(&self, q: u32, slot: u32, half: u32) -> u32 {
        (self.world + 2 * self.world * self.inbox_tiles() + (q * self.tiles() + slot) * 2 + half) * FLAG_STRIDE
    }
    /// Index of `pref[s][slot][half]` (one node, [`Self::prefetch`]): source s's partial of my
    /// tile `slot` is in my inbox, pulled by one of my send tiles' helpers.
    pub fn pref_flag(&self, s: u32, slot: u32, half: u32) -> u32 {
        (self.world + (2 * self.world + s) * 2 * self.inbox_tiles() + slot * 2 + half) * FLAG_STRIDE
    }
    /// Index of `ack[s][slot][half]` (one node, [`Self::pull_reduced`]): local rank s pulled my
    /// reduced tile `slot`, half `half`, from my output.
    pub fn ack_flag(&self, s: u32, slot: u32, half: u32) -> u32 {
        (self.world + (3 * self.world + s) * 2 * self.inbox_tiles() + slot * 2 + half) * FLAG_STRIDE
    }
    /// Byte offset of source s's slot for my inbox slot `slot` ([`Self::inbox_slot`]), half
    /// `half`, in `staging` (the inbox; several nodes: `s` = [`GemmRsParams::inbox`]).
    pub fn slot_offset(&self, s: u32, slot: u32, half: u32) -> u64 {
        ((s * self.inbox_tiles() + slot) * 2 + half) as u64 * HALF_TILE_BYTES as u64
    }
    /// Whether owners (or collectors) pull the partials rather than sources pushing them: see
    /// `kernels::gemm_rs`.
    pub const fn pulls(&self) -> bool {
        self.push == 0
    }
    /// Whether own tiles' partials come through the send tiles' prefetches (see
    /// [`Self::prefetch`]).
    pub const fn prefetches(&self) -> bool {
        self.pulls() && self.prefetch != 0 && self.nodes <= 1 && self.one_shot == 0
    }
    /// Byte offset in `staging`, after the inbox, of my partial of block q's tile `slot`, half
    /// `half`, waiting for q's collector (one node: q itself) to pull it (when [`Self::pulls`]).
    pub fn outbox_offset(&self, q: u32, slot: u32, half: u32) -> u64 {
        self.slot_offset(self.world + q, slot, half)
    }
    /// Bytes of `staging` before the node partials: the inbox, and the outbox when owners pull
    /// or the copy engines send (`outbox`; `inbox_tiles`: [`Self::inbox_tiles_of`]).
    pub const fn staging_bytes(world: u32, inbox_tiles: u32, outbox: bool) -> u64 {
        (if outbox { 2 } else { 1 }) * (world * inbox_tiles * 2) as u64 * HALF_TILE_BYTES as u64
    }

    // The copy engines' bands (see [`Self::engine_counts`]).

    /// Whether the copy engines move the partials (and the all-reduce's reduced blocks).
    pub const fn engines(&self) -> bool {
        self.engine_counts != 0
    }
    /// Tile rows of an owner block per band: one `group_m` group, which the grouped walk
    /// finishes before it starts the next.
    pub const fn band_tile_rows(&self) -> u32 {
        Self::band_shape(self.rows, self.gemm.n, self.gemm.group_m).2
    }
    /// Bands of an owner block.
    pub const fn bands(&self) -> u32 {
        Self::band_shape(self.rows, self.gemm.n, self.gemm.group_m).0
    }
    /// (bands, tiles of a whole band, tile rows of a whole band) of an owner block of `rows` rows
    /// by `n` columns walked in groups of `group_m` tile rows (0: 1; a group taller than the
    /// block is the block, so the band arithmetic stays within its rows): the one place the
    /// host's rules and the kernels take them from.
    pub const fn band_shape(rows: u32, n: u32, group_m: u32) -> (u32, u32, u32) {
        use crate::kernels_info::gemm::{TILE_M, TILE_N};
        // The walk's grid clamps the group as the tiles' walk does (`TileGrid::new`).
        let grid = crate::sched::TileGrid::new(rows, n, TILE_M, TILE_N, group_m);
        let (g, m_tiles) = (grid.group_m, grid.m_tiles);
        let band_rows = if g < m_tiles { g } else { m_tiles };
        (m_tiles.div_ceil(g), band_rows * grid.n_tiles, g)
    }
    /// The band of an owner block's tile row `tm`.
    pub const fn band_of(&self, tm: u32) -> u32 {
        tm / self.band_tile_rows()
    }
    /// The slots `[first, end)` of band `b` (whole tile rows: slot = tile row x tile columns +
    /// tile column).
    pub const fn band_slots(&self, b: u32) -> (u32, u32) {
        let m_tiles = self.rows.div_ceil(crate::kernels_info::gemm::TILE_M);
        let n_tiles = self.gemm.n.div_ceil(crate::kernels_info::gemm::TILE_N);
        let end = (b + 1) * self.band_tile_rows();
        (b * self.band_tile_rows() * n_tiles, if end < m_tiles { end } else { m_tiles } * n_tiles)
    }
    /// The rows `[first, end)` of an owner block that band `b` covers.
    pub const fn band_rows(&self, b: u32) -> (u32, u32) {
        let tile_m = crate::kernels_info::gemm::TILE_M;
        let end = (b + 1) * self.band_tile_rows() * tile_m;
        (b * self.band_tile_rows() * tile_m, if end < self.rows { end } else { self.rows })
    }
    /// Half tiles of band `b` of one block.
    pub const fn band_halves(&self, b: u32) -> u32 {
        let (first, end) = self.band_slots(b);
        2 * (end - first)
    }
    /// Index in [`Self::engine_counts`] of band `b`'s counter: `phase` 0, my partials of every
    /// other local rank's block; 1 (all-reduce), my reduced block.
    pub const fn engine_count(&self, phase: u32, b: u32) -> u32 {
        phase * self.bands() + b
    }
    /// What band `b`'s counter of `phase` reaches once every half tile it counts is published:
    /// phase 0 counts each other local rank's band, phase 1 my own.
    pub const fn engine_target(&self, phase: u32, b: u32) -> u32 {
        if phase == 0 {
            (self.local_world - 1) * self.band_halves(b)
        } else {
            self.band_halves(b)
        }
    }
    /// Counters in [`Self::engine_counts`].
    pub const fn engine_counts_len(&self) -> u32 {
        2 * self.bands()
    }
    /// Whether the copy engines copy band `b` of my reduced block (all-reduce): all but the
    /// last [`Self::engine_tail`], which the helpers push.
    pub const fn engines_copy_reduced(&self, b: u32) -> bool {
        self.engines() && b + self.engine_tail < self.bands()
    }
    /// Index of my mirror of owner q's `part[me][slot][half]`: `pref[q][slot][half]`, which
    /// only pulling owners use otherwise.
    pub fn part_mirror(&self, q: u32, slot: u32, half: u32) -> u32 {
        self.pref_flag(q, slot, half)
    }

    // Several nodes (see the type's docs and `sched::NodeMap`).

    /// Where this rank sits among the nodes.
    pub const fn node_map(&self) -> crate::sched::NodeMap {
        crate::sched::NodeMap::new(self.rank, self.local_world, self.nodes)
    }
    /// The inbox source index of local rank `s`'s partial of my `qi`-th collected block (for
    /// [`Self::slot_offset`] and [`Self::part_flag`]; one node: `s` itself).
    pub const fn inbox(&self, qi: u32, s: u32) -> u32 {
        qi * self.local_world + s
    }
    /// Half tiles of a block, in walk order: `item = 2 x local tile index + half`.
    pub fn items(&self) -> u32 {
        2 * self.tiles()
    }
    /// Bytes of the node partials: `nodes x nodes` blocks of `2 x per_owner` half tiles.
    pub const fn nodebox_bytes(nodes: u32, per_owner: u32) -> u64 {
        (nodes * nodes * 2 * per_owner) as u64 * HALF_TILE_BYTES as u64
    }
    /// Byte offset in `staging` of node m's partial of my `qi`-th collected block, half tile
    /// `item` (half tiles of a block are contiguous: a group is one range).
    pub fn node_offset(&self, qi: u32, m: u32, item: u32) -> u64 {
        let base = Self::staging_bytes(self.world, self.inbox_tiles(), self.pulls());
        base + ((qi * self.nodes + m) * self.items() + item) as u64 * HALF_TILE_BYTES as u64
    }
    /// Index of `node[qi][m][item]`: node m's partial of half tile `item` of my `qi`-th
    /// collected block is in my staging. For my own node (raised by my helpers) every item has
    /// its flag; a FIFO WRITE from another node raises the flag of its group's last item only.
    pub fn node_flag(&self, qi: u32, m: u32, item: u32) -> u32 {
        (self.world + 4 * self.world * self.inbox_tiles() + (qi * self.nodes + m) * self.items() + item) * FLAG_STRIDE
    }
    /// The half tiles `[first, end)` of group `g` (one FIFO WRITE).
    pub fn group_items(&self, g: u32) -> (u32, u32) {
        let per = 2 * self.group;
        // `group` >= 1 (the host checks it).
        let first = g * per;
        (first, (first + per).min(self.items()))
    }
    /// Groups per block.
    pub fn groups(&self) -> u32 {
        crate::sched::div_nz(self.tiles() + self.group - 1, self.group)
    }
    /// The item whose node-`m` flag says that half tile `item` of node m's partial is here:
    /// itself for my node, else the last of its group.
    pub fn arrival_item(&self, m: u32, item: u32) -> u32 {
        if m == self.node_map().node() {
            item
        } else {
            self.group_items(crate::sched::div_nz(item, 2 * self.group)).1 - 1
        }
    }
    /// 1 when this is an all-reduce (for [`crate::sched::NodeMap`]'s rules).
    pub const fn is_all_reduce(&self) -> bool {
        self.all_reduce != 0
    }
}

abi_struct! {
    /// The unfused reference of GEMM + ReduceScatter / AllReduce: every rank's bf16 partial
    /// `[M, N]` (this call's buffer) is summed over ranks in rank order (fp32), rows `row0 ..
    /// row0 + rows`, into `out`. Ranks first tell each other their partial is complete (`ready`).
    pub struct ReduceParams [208] {
        /// Each local rank's partial, mapped here (index: local rank).
        pub partials: [u64; 8],
        /// Output rows `row0 ..`, `[rows, n]` bf16 or f32.
        pub out: u64,
        /// My flags: `ready[world]`.
        pub flags: u64,
        /// Each local rank's flags, mapped here.
        pub peer_flags: [u64; 8],
        /// Launch counter (device `u64`): gives each launch its epoch.
        pub launches: u64,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on every device-side wait, in ns.
        pub timeout_ns: u64,
        /// First row this rank sums (its owner block for a reduce-scatter, 0 for an all-reduce).
        pub row0: u32,
        /// Rows this rank sums (`M / world`, or `M` for an all-reduce).
        pub rows: u32,
        /// Columns (N).
        pub n: u32,
        /// Ranks in the world (all on this node).
        pub world: u32,
        /// This rank.
        pub rank: u32,
        /// 1: `out` is f32; 0: bf16.
        pub out_f32: u32,
        /// Rows per owner block (`M / world`): the owner of a row sums first.
        pub rows_per_owner: u32,
        /// Padding up to the asserted size; always 0.
        pub _pad: u32,
    }
}

abi_struct! {
    /// The unfused reference of GEMM + ReduceScatter / AllReduce over several nodes, after every
    /// rank's GEMM wrote its bf16 partial `[M, N]` (this call's buffer): the same sums in the
    /// same order as the fused kernel's ([`GemmRsParams`]), row-major instead of tiled. Each rank
    /// sums its node's partials of every block it collects (its own first, then local rank
    /// order, fp32) into `nodebuf[qi][node]` (bf16 `[rows, N]`), sends the ones others need with
    /// one FIFO WRITE each (to the same offset there, flag `node[qi][node]`), then adds every
    /// node's partial of each block it finalises in node order (fp32) into `out` (all-reduce:
    /// also into every local rank's `out`, then `done` there). Flags (u32 epochs, see the index
    /// functions): `ready[world]` (rank s's partial is complete and it entered this launch),
    /// `node[nodes][nodes]`, `done[local_world]`.
    pub struct ReduceNodesParams [344] {
        /// Each local rank's partial `[M, N]`, mapped here (index: local rank).
        pub partials: [u64; 8],
        /// Each local rank's output, mapped here: `[rows, N]` (reduce-scatter) or `[M, N]`.
        pub out: [u64; 8],
        /// My node partials `[qi][m]` of `[rows, N]` bf16 (this call's buffer).
        pub nodebuf: u64,
        /// Heap offset of `nodebuf`.
        pub nodebuf_heap_off: u64,
        /// My flags.
        pub flags: u64,
        /// Heap offset of `flags`.
        pub flags_heap_off: u64,
        /// Each local rank's flags, mapped here.
        pub peer_flags: [u64; 8],
        /// Two last-arriver counters (device `u32`s, zero before the first launch).
        pub counters: u64,
        /// Launch counter (device `u64`): gives each launch its epoch.
        pub launches: u64,
        /// The communicator's FIFO.
        pub fifo: FifoParams,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on every device-side wait, in ns.
        pub timeout_ns: u64,
        /// Rows per owner block (`M / world`).
        pub rows: u32,
        /// Columns (N).
        pub n: u32,
        /// This rank.
        pub rank: u32,
        /// Ranks per node.
        pub local_world: u32,
        /// Nodes.
        pub nodes: u32,
        /// 1: all-reduce; 0: reduce-scatter.
        pub all_reduce: u32,
        /// 1: `out` is f32; 0: bf16.
        pub out_f32: u32,
        /// Padding up to the asserted size; always 0.
        pub _pad: u32,
    }
}

impl ReduceNodesParams {
    /// Where this rank sits among the nodes.
    pub const fn node_map(&self) -> crate::sched::NodeMap {
        crate::sched::NodeMap::new(self.rank, self.local_world, self.nodes)
    }
    /// Flag words per rank.
    pub const fn flag_words(world: u32, nodes: u32, local_world: u32) -> u32 {
        (world + nodes * nodes + local_world) * FLAG_STRIDE
    }
    /// Index of `ready[s]`.
    pub const fn ready_flag(s: u32) -> u32 {
        s * FLAG_STRIDE
    }
    /// Index of `node[qi][m]`: node m's partial of my `qi`-th collected block is in `nodebuf`.
    pub const fn node_flag(&self, qi: u32, m: u32) -> u32 {
        (self.nodes * self.local_world + qi * self.nodes + m) * FLAG_STRIDE
    }
    /// Index of `done[lr]`: local rank lr's final blocks are in my output (all-reduce).
    pub const fn done_flag(&self, lr: u32) -> u32 {
        (self.nodes * self.local_world + self.nodes * self.nodes + lr) * FLAG_STRIDE
    }
    /// Bytes of one node partial.
    pub const fn block_bytes(&self) -> u64 {
        self.rows as u64 * self.n as u64 * 2
    }
    /// Byte offset in `nodebuf` of node m's partial of my `qi`-th collected block.
    pub const fn nodebuf_offset(&self, qi: u32, m: u32) -> u64 {
        (qi * self.nodes + m) as u64 * self.block_bytes()
    }
    /// 1 when this is an all-reduce (for [`crate::sched::NodeMap`]'s rules).
    pub const fn is_all_reduce(&self) -> bool {
        self.all_reduce != 0
    }
}

/// NVLink copy by ordinary 16-byte vector loads and stores from every thread of the CTA.
pub const COPY_LSU: u32 = 0;
/// NVLink copy by TMA bulk copies (global -> shared -> peer global) issued by one thread,
/// through a ring of shared-memory stages (see `kernels_info::allgather`).
pub const COPY_BULK: u32 = 1;
/// NVLink copy by TMA bulk copies as [`COPY_BULK`], each piece loaded once and stored to every
/// local rank (one bulk group per piece) instead of one rank after another.
pub const COPY_FAN: u32 = 2;
/// NVLink copy by TMA bulk copies that read: every rank's intra-comm CTAs pull each local peer's
/// shard into their own output (the reads of every source interleaved), instead of pushing
/// their own shard into the peers'.
pub const COPY_PULL: u32 = 3;
/// The copy engines move the shards over NVLink, enqueued by the host between two small
/// launches of the all-gather kernel: this one (every local peer entered: their outputs may be
/// written) ...
pub const COPY_CE_ENTER: u32 = 4;
/// ... and this one, after the copies in stream order (raise `data[rank]` on every local peer,
/// then wait for every shard). Each has a launch counter of its own, so both count the same
/// epochs.
pub const COPY_CE_LEAVE: u32 = 5;

abi_struct! {
    /// FIFO exercise: every thread of the grid pushes `per_thread` commands whose fields encode
    /// (thread, index) (mode 0); or thread 0 alone ping-pongs `per_thread` SIGNALs with the proxy,
    /// which answers by setting `reply_flag`, and records each round trip in ns to `out` (mode 1).
    pub struct FifoTestParams [96] {
        /// The FIFO pushed into.
        pub fifo: FifoParams,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on each wait (a full ring, the proxy's reply), in ns.
        pub timeout_ns: u64,
        /// Mode 1: device address of `per_thread` `u64` round trips in ns; unused in mode 0.
        pub out: u64,
        /// Mode 1: device address of the host-mapped `u32` the proxy sets to each SIGNAL's value.
        pub reply_flag: u64,
        /// Commands per thread (mode 0) or round trips (mode 1).
        pub per_thread: u32,
        /// [`FIFO_TEST_THROUGHPUT`] or [`FIFO_TEST_PINGPONG`].
        pub mode: u32,
    }
}

/// Throughput mode of the FIFO exercise.
pub const FIFO_TEST_THROUGHPUT: u32 = 0;
/// Ping-pong mode of the FIFO exercise.
pub const FIFO_TEST_PINGPONG: u32 = 1;

/// [`MoeParams::mode`]: dispatch and grouped GEMM in one launch.
pub const MOE_FUSED: u32 = 0;
/// [`MoeParams::mode`]: the dispatch alone (no compute CTAs): rows land in `xe`, the layout is
/// written, nothing is multiplied.
pub const MOE_DISPATCH_ONLY: u32 = 1;
/// [`MoeParams::mode`]: the grouped GEMM alone over the rows and layout the last dispatch left
/// (compute CTAs only, no waits, no communication). The host launches it with the fused launch's
/// pull CTAs counted as compute CTAs: every SM computes.
pub const MOE_GEMM_ONLY: u32 = 2;
/// [`MoeParams::flags`] bit: in a fused launch, compute CTAs move rows (take pull items) until
/// their first tile's rows are in.
pub const MOE_COMPUTE_HELPS: u32 = 1;
/// [`MoeParams::flags`] bit: this rank's own tokens are not laid out in `xe`; the grouped GEMM
/// reads them from `x` where they are (a gathering producer, `mk_moe_gather_*` kernels), the
/// other sources' rows as laid out.
pub const MOE_GATHER: u32 = 2;
/// [`MoeParams::flags`] bit: in a fused launch of the laid-out form (not [`MOE_GATHER`]), the
/// pull CTAs claim tiles once the pull items run out. Compute and pull CTAs then draw the tiles
/// from a counter ([`MoeScratch::TILE_COUNTERS`]) in the grouped order; without it each compute
/// CTA walks its static share and the pull CTAs end with the pull.
pub const MOE_JOIN: u32 = 4;
/// [`MoeParams::flags`] bit (one node): the copy engines put each rank's tokens into every
/// local peer's `rx` (a stream of the host's, queued behind the launch: `ops::moe`), so pull
/// CTAs read a peer's rows from their own GPU's memory instead of over NVLink, and nobody
/// copies into `x_heap`. Two kinds of 0/1 words (not epochs: the host cannot know a launch's
/// epoch under graph replay): once every peer's `done` of the last launch is in (it read its
/// last row from its `rx`), the last pull CTA raises this rank's `engine_go`, on which the
/// stream waits, sets it back to zero, and copies the tokens into each peer's `rx`, each copy
/// followed by one that sets `engine_in[me]` there; a reader's last pull CTA waits for every
/// peer's `engine_in` and sets it back to zero before it raises `done`. The stream waits only
/// on its own launch, which raises `engine_go` whatever its bounded waits did.
pub const MOE_ENGINES: u32 = 8;
/// [`MoeParams::flags`] bit: pull items take every run of this rank's own records first, then
/// the peers' in turn (`MoeScratch`'s item order), instead of one run of each source in turn.
/// With [`MOE_ENGINES`] a peer's rows are readable only once its whole `x` landed, so runs of
/// peers taken early would hold their CTAs until then.
pub const MOE_OWN_FIRST: u32 = 16;
/// [`MoeParams::flags`] bit, fused launches of the laid-out form: the producer warpgroup's two
/// spare warps of every CTA running tiles take pull items beside them (`InputGate::side`),
/// moving rows with 16-byte loads and stores. One SM writes about 45 GB/s however it stores, so
/// the dispatch costs its pull CTAs' SMs that long; a compute CTA's SM writes almost nothing
/// while it multiplies.
pub const MOE_SIDE_PULL: u32 = 64;

/// [`MoeParams::errors`] code: a routing entry names an expert outside `0..experts`; the token
/// is not sent anywhere. The record's words: code, token, slot, the expert id.
pub const MOE_ERR_BAD_EXPERT: u32 = 1;
/// [`MoeParams::errors`] code: a token names one expert twice. Words: code, token, slot, expert.
pub const MOE_ERR_DUP_EXPERT: u32 = 2;
/// [`MoeParams::errors`] code: the rows this rank receives (each expert's rows rounded up to a
/// tile) exceed `cap_rows`; nothing is written. Words: code, rows needed, `cap_rows`, 0.
pub const MOE_ERR_CAPACITY: u32 = 3;

/// Experts a token may pick at most (`top_k`).
pub const MOE_MAX_TOP_K: u32 = 16;
/// Experts in all at most (the router keeps per-warp expert histograms in shared memory).
pub const MOE_MAX_EXPERTS: u32 = 1024;
/// Warps of a router CTA (the GEMM engine's 384 threads).
pub const MOE_ROUTER_WARPS: u32 = 12;
/// Ranks in all at most: a pull CTA keeps one bit per source rank in a `u64` (whose records and
/// rows it already saw arrive). Ranks per node are bounded by [`MAX_LOCAL_RANKS`] besides.
pub const MOE_MAX_WORLD: u32 = 64;

/// A token's leading slots: bit `j` is set when slot `j`'s expert is the token's lowest on that
/// expert's rank. A token sends one record per destination rank, and the record is ordered by
/// that expert; a token has at most `top_k` destinations, so this mask takes one register at any
/// world size. `ex` holds the token's experts by slot, `u32::MAX` for a slot ruled out (which
/// never leads), and `dst` each slot's destination rank (`ex / local_experts`; anything for a
/// slot ruled out). `K` (at most 16) bounds `top_k`: the loops are written out to it, so on the
/// GPU both arrays stay in registers.
#[inline(always)]
pub fn moe_lead_slots<const K: usize>(ex: &[u32; K], dst: &[u32; K], top_k: u32) -> u32 {
    const { assert!(K <= 16) };
    let k = (top_k as usize).min(K);
    let mut leads = 0;
    macro_rules! slot {
        ($($j:literal)*) => {$(
            if $j < k && ex[$j] != u32::MAX {
                let mut lower = false;
                for o in 0..K {
                    lower |= o < k && dst[o] == dst[$j] && ex[o] < ex[$j];
                }
                leads |= (!lower as u32) << $j;
            }
        )*};
    }
    slot!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
    leads
}

abi_struct! {
    /// MoE dispatch + grouped GEMM in one launch. Rank r holds `tokens` rows of `x [tokens,
    /// hidden]`, `topk_idx [tokens, top_k]` (i32) and `topk_weight` (f32), and the first
    /// projection of its `local_experts` experts (expert e lives on rank `e / local_experts`).
    ///
    /// Protocol (u32 epoch flags, [`FLAG_STRIDE`] apart, see the index functions):
    /// 1. The router (the intra-comm CTAs, a contiguous share of the tokens each, two barriers
    ///    among them) scans this rank's routing once: per expert, each token's position among
    ///    this rank's tokens routed to it (token order), and per destination rank a record per
    ///    token it needs (token, then `(local expert | slot << 16, position, weight)` for each of
    ///    its experts there), records ordered by the token's first expert there, in the outbox.
    ///    Every intra-comm CTA copies a share of the records of each other rank on this node to
    ///    its `inbox`, CTA 0 the counts (a rank's own stay in its outbox); the last CTA done
    ///    raises `records[me]` and `counts[me]` there.
    /// 2. Once every rank's counts are in, intra-comm CTA 0 lays out what this rank receives:
    ///    expert e's rows start at a multiple of `TILE_M` (`expert_off`), sources in the order
    ///    me, me + 1, ... (own rows first), each source's rows in its token order; it writes the
    ///    tile and pull tables to `scratch` and raises the local layout flag.
    /// 3. This rank's tokens are copied into `x_heap` in chunks (the last one raises `xready`):
    ///    in a fused launch by the compute CTAs from the launch's start (chunk i by compute CTA
    ///    i mod compute), before the layout; in the dispatch alone by the pull CTAs, as its
    ///    first pull items. Pull items, handed out in order by a scratch counter the layout
    ///    reset: those copies where the pull CTAs do them, then runs of records taken
    ///    from each source in turn, whose rows move through shared memory (own tokens from `x`, a
    ///    peer's from its `x_heap` once its `xready` is up): a row is read once per destination
    ///    rank and written to every local expert row it has. Each row written bumps the counter
    ///    of its `TILE_M`-row block of `xe`. Pull CTAs take items until none is left; with
    ///    [`MOE_COMPUTE_HELPS`], compute CTAs take them too until their first tile's block is full.
    /// 4. Compute CTAs run the GEMM engine over `xe` expert by expert (the order the rows fill
    ///    in), each tile waiting until its block's counter reaches the rows it has. With
    ///    [`MOE_JOIN`] the pull CTAs join them once no pull item is left, every CTA drawing the
    ///    next tile from a counter.
    /// 5. When every item is done, the last pull CTA raises `done[me]` on every rank: a rank
    ///    overwrites its `x_heap`, anyone's `rx` or anyone's `inbox` in the next launch only after
    ///    that.
    ///
    /// With [`MOE_ENGINES`] (one node) step 3 has no `x_heap` copies: the host's stream copies
    /// `x` into every local peer's `rx` once this launch's `engine_go` is up, and a peer's rows
    /// are read from this rank's own `rx` once `engine_in[s]` is (the handshake on
    /// [`MOE_ENGINES`]).
    ///
    /// Ranks on other nodes: records and counts arrive by FIFO WRITEs through the proxy (raising
    /// `records[s]` and `counts[s]`), `done` by SIGNALs; a rank's tokens go once per other node
    /// (after its counts and records: the proxy serves the FIFO in order) to the rank there with
    /// the same local rank (its `rx`, raising `rxready[s]`), from which
    /// that node's ranks pull them.
    ///
    /// `world` is at most [`MOE_MAX_WORLD`], `local_world` at most [`MAX_LOCAL_RANKS`].
    pub struct MoeParams [328] {
        /// The grouped GEMM: `a_map` over `xe [cap_rows, hidden]`, `b_map` over the experts'
        /// weights stacked (`[local_experts * hidden, inter]` or `[local_experts * inter,
        /// hidden]`), `c_map` / `c` over `y [cap_rows, inter]`; `m` = `cap_rows`, `n` =
        /// inter, `k` = hidden; `roles`: compute, then intra-comm (router + pull) CTAs.
        pub gemm: GemmParams,
        /// This rank's tokens `[tokens, hidden]` bf16 (the caller's buffer).
        pub x: u64,
        /// `[tokens, top_k]` i32 expert ids.
        pub topk_idx: u64,
        /// `[tokens, top_k]` f32 routing weights (carried into the row table).
        pub topk_weight: u64,
        /// Device address of a [`MoePeers`] table.
        pub peers: u64,
        /// This rank's outbox (device memory): records per destination, staged for bulk copies.
        pub outbox: u64,
        /// Rows received, grouped by expert: `[cap_rows, hidden]` bf16.
        pub xe: u64,
        /// One [`MoeRow`] per row of `xe`.
        pub rows: u64,
        /// Tables and counters, laid out as [`MoeScratch`] says.
        pub scratch: u64,
        /// Device `[u32; 4]`: the first routing error of a launch (`MOE_ERR_*`, then details).
        pub errors: u64,
        /// Launch counter (device `u64`): gives each launch its epoch.
        pub launches: u64,
        /// The communicator's FIFO (routing records, tokens and flags for other nodes go through
        /// it and the proxy).
        pub fifo: FifoParams,
        /// Heap offsets (the same on every rank) of the outbox, the inbox, the flags, `x_heap`
        /// and `rx` (what FIFO commands carry).
        pub outbox_off: u64,
        /// Heap offset of the inbox.
        pub inbox_off: u64,
        /// Heap offset of the flags.
        pub flags_off: u64,
        /// Heap offset of `x_heap`.
        pub x_heap_off: u64,
        /// Heap offset of `rx`: `[world][max_tokens, hidden]`, where a rank receives the tokens
        /// of its counterparts (same local rank) on other nodes, for its node's ranks to pull.
        pub rx_off: u64,
        /// Tokens this rank holds (at most `max_tokens`).
        pub tokens: u32,
        /// Tokens any rank may hold (sizes `x_heap` and the inbox).
        pub max_tokens: u32,
        /// Row length (K of the GEMM).
        pub hidden: u32,
        /// Experts in all.
        pub experts: u32,
        /// Experts per rank.
        pub local_experts: u32,
        /// Experts per token.
        pub top_k: u32,
        /// This rank.
        pub rank: u32,
        /// Ranks in the world.
        pub world: u32,
        /// This rank's index on its node.
        pub local_rank: u32,
        /// Ranks per node.
        pub local_world: u32,
        /// Tokens per `x_heap` copy item.
        pub chunk_tokens: u32,
        /// Records per pull item from a peer.
        pub run_records: u32,
        /// Rows of `xe` / `y`.
        pub cap_rows: u32,
        /// Rows of the stacked B per expert (`hidden` for `[E, H, I]`, `inter` for `[E, I, H]`).
        pub b_rows_per_expert: u32,
        /// [`MOE_FUSED`], [`MOE_DISPATCH_ONLY`] or [`MOE_GEMM_ONLY`].
        pub mode: u32,
        /// [`MOE_COMPUTE_HELPS`], [`MOE_GATHER`], [`MOE_JOIN`], [`MOE_ENGINES`], [`MOE_OWN_FIRST`]:
        /// a bitwise or.
        pub flags: u32,
    }
}

abi_struct! {
    /// Where each local rank's MoE buffers are mapped in this process (index: local rank).
    pub struct MoePeers [256] {
        /// Its `x_heap`.
        pub x_heap: [u64; 8],
        /// Its `rx` (tokens from other nodes).
        pub rx: [u64; 8],
        /// Its inbox.
        pub inbox: [u64; 8],
        /// Its flags.
        pub flags: [u64; 8],
    }
}

abi_struct! {
    /// What one row of `xe` (and of the output) holds: which token of which rank, picked in
    /// which top-k slot, with what weight. Padding rows (each expert's rows are rounded up to
    /// a tile) have `src_rank = -1`.
    pub struct MoeRow [16] {
        /// Source rank, or -1 for a padding row.
        pub src_rank: i32,
        /// Token index on the source rank.
        pub token: i32,
        /// Top-k slot (0..top_k).
        pub slot: i32,
        /// The routing weight.
        pub weight: f32,
    }
}

/// Tile rows of the grouped GEMM's layout (each expert's rows start at a multiple of it).
pub const MOE_TILE_M: u32 = crate::kernels_info::gemm::TILE_M;

impl MoeParams {
    /// u32 words of one source's counts in an inbox: tokens, records, then one count per local
    /// expert.
    pub const fn counts_words(local_experts: u32) -> u32 {
        2 + local_experts
    }
    /// u32 words of one record: token, entries, then three words per entry.
    pub const fn record_words(top_k: u32) -> u32 {
        2 + 3 * top_k
    }
    /// Bytes of an inbox (and of the outbox): counts `[world]`, then records `[world][max_tokens]`
    /// (each source's [`Self::records_stride`] apart).
    pub const fn inbox_bytes(world: u32, max_tokens: u32, local_experts: u32, top_k: u32) -> u64 {
        Self::records_off(world, local_experts) + world as u64 * Self::records_stride(max_tokens, top_k)
    }
    /// Bytes from one source's records to the next's: `max_tokens` records rounded up to 16, so
    /// that every source's records start 16-byte aligned and ship by bulk copies (an odd
    /// `max_tokens` at top-k 8, 104-byte records, would leave every other source's on 8 bytes).
    pub const fn records_stride(max_tokens: u32, top_k: u32) -> u64 {
        (max_tokens as u64 * Self::record_words(top_k) as u64 * 4).div_ceil(16) * 16
    }
    /// Byte offset of the records in an inbox (16-byte aligned).
    pub const fn records_off(world: u32, local_experts: u32) -> u64 {
        ((world * Self::counts_words(local_experts)) as u64 * 4).div_ceil(16) * 16
    }
    /// Byte offset of source s's counts in an inbox.
    pub const fn counts_at(&self, s: u32) -> u64 {
        (s * Self::counts_words(self.local_experts)) as u64 * 4
    }
    /// Router CTA `c`'s share (of `routers`) of a destination's records, bytes `r0..r1` of the
    /// outbox: contiguous shares of a multiple of 16 bytes each, in CTA order, the last ones
    /// shorter or empty; together exactly `r0..r1`.
    pub const fn record_share(r0: u64, r1: u64, routers: u32, c: u32) -> (u64, u64) {
        let len = r1 - r0;
        let per = len.div_ceil(16 * routers as u64) * 16;
        let a = c as u64 * per;
        let b = a + per;
        (r0 + if a < len { a } else { len }, r0 + if b < len { b } else { len })
    }
    /// Byte offset of source s's record i in an inbox.
    pub const fn record_at(&self, s: u32, i: u32) -> u64 {
        Self::records_off(self.world, self.local_experts)
            + s as u64 * Self::records_stride(self.max_tokens, self.top_k)
            + i as u64 * Self::record_words(self.top_k) as u64 * 4
    }
    /// Flag words: `counts[world]`, `done[world]`, `xready`, `records[world]`, `rxready[world]`,
    /// `engine_in[world]`, `engine_go`.
    pub const fn flag_words(world: u32) -> u32 {
        (5 * world + 2) * FLAG_STRIDE
    }
    /// `counts[s]`: source s's counts for me are in my inbox.
    pub const fn counts_flag(s: u32) -> u32 {
        s * FLAG_STRIDE
    }
    /// `done[d]`: rank d finished reading my `x_heap` (or `rx`) and its records from this launch.
    pub const fn done_flag(&self, d: u32) -> u32 {
        (self.world + d) * FLAG_STRIDE
    }
    /// `xready`: my tokens are in my `x_heap`.
    pub const fn xready_flag(&self) -> u32 {
        2 * self.world * FLAG_STRIDE
    }
    /// `records[s]`: source s's records for me are in my inbox.
    pub const fn records_flag(&self, s: u32) -> u32 {
        (2 * self.world + 1 + s) * FLAG_STRIDE
    }
    /// `rxready[s]`: source s's tokens (s on another node) are in my `rx`.
    pub const fn rxready_flag(&self, s: u32) -> u32 {
        (3 * self.world + 1 + s) * FLAG_STRIDE
    }
    /// `engine_in[s]` ([`MOE_ENGINES`], 0 or 1, not an epoch): source s's copy engine put its
    /// tokens into my `rx`; I set it back to zero once my pull is done.
    pub const fn engine_in_flag(&self, s: u32) -> u32 {
        (4 * self.world + 1 + s) * FLAG_STRIDE
    }
    /// `engine_go` ([`MOE_ENGINES`], 0 or 1): every peer read my last launch's tokens from its
    /// `rx` (or a wait for its `done` gave up, reported); my stream waits for it, sets it back
    /// to zero, then copies.
    pub const fn engine_go_flag(&self) -> u32 {
        (5 * self.world + 1) * FLAG_STRIDE
    }
    /// Whether the copy engines move the tokens between this node's ranks ([`MOE_ENGINES`]).
    pub const fn engines(&self) -> bool {
        self.flags & MOE_ENGINES != 0
    }
    /// Nodes in the world.
    pub const fn nodes(&self) -> u32 {
        self.world / self.local_world
    }
    /// Byte offset of source s's tokens in an `rx`.
    pub const fn rx_at(&self, s: u32) -> u64 {
        s as u64 * self.max_tokens as u64 * self.row_bytes()
    }
    /// `x_heap` copy items of this launch (none without another rank to read it, nor with the
    /// copy engines, which copy from `x`).
    pub const fn x_items(&self) -> u32 {
        if self.world > 1 && !self.engines() {
            self.tokens.div_ceil(self.chunk_tokens)
        } else {
            0
        }
    }
    /// Bytes of one token row.
    pub const fn row_bytes(&self) -> u64 {
        self.hidden as u64 * 2
    }
    /// Pieces a row moves in: bulk copies of [`BULK_CHUNK`] bytes, the last one shorter.
    ///
    /// [`BULK_CHUNK`]: crate::kernels_info::allgather::BULK_CHUNK
    pub const fn pieces(&self) -> u32 {
        self.row_bytes().div_ceil(MOE_PIECE as u64) as u32
    }
    /// Byte offset in a row and length of its piece `pc` (below [`MoeParams::pieces`]).
    pub const fn piece(&self, pc: u32) -> (u64, u32) {
        let off = pc as u64 * MOE_PIECE as u64;
        let rest = self.row_bytes() - off;
        (off, if rest < MOE_PIECE as u64 { rest as u32 } else { MOE_PIECE })
    }
}

/// Bytes of a row piece (one bulk copy through a pull CTA's ring stage).
const MOE_PIECE: u32 = crate::kernels_info::allgather::BULK_CHUNK;

/// Where each table lives in the MoE scratch (u32 word offsets), for `local_experts` experts,
/// `world` ranks, `cap_rows` rows and `routers` router CTAs (the pull CTAs). Words `0`,
/// [`FLAG_STRIDE`], ... `6 * FLAG_STRIDE` are the local layout flag and six counters: the pull
/// CTAs' finish, the `x_heap` copy items' and the router CTAs' two barriers (all only growing),
/// then the next pull item and the pull items done (reset with each layout); the rest is
/// rewritten every launch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MoeScratch {
    /// `[local_experts + 1]`: first row of each expert's rows in `xe` (a multiple of
    /// [`MOE_TILE_M`]); the last entry is the rows used.
    pub expert_off: u32,
    /// `[local_experts]`: rows each expert received (padding excluded).
    pub expert_rows: u32,
    /// `[local_experts + 1]`: prefix sums of tiles per expert, the tile order of the grouped GEMM
    /// (expert by expert: the order rows fill in); the last entry is the tiles in all.
    pub tile_start: u32,
    /// `[world][local_experts]`: rows each source sent each local expert (the combine's counts),
    /// sources by rank.
    pub recv_counts: u32,
    /// `[local_experts][world]`: where each source's rows start within each expert's (sources in
    /// receive order: this rank, then the next ones).
    pub src_off: u32,
    /// `[world + 2]`: pull items: `x_heap` copy items, the most runs of records any peer
    /// (source position 1 and on) has, then the runs of each source position (0: own tokens).
    pub items: u32,
    /// `[cap_rows / TILE_M]`: expert of each tile row of `xe`.
    pub m_expert: u32,
    /// `[cap_rows / TILE_M]`: rows each tile row must receive before it is multiplied.
    pub m_target: u32,
    /// `[cap_rows / TILE_M]`: rows each tile row received so far (reset every launch).
    pub m_count: u32,
    /// `[2][routers][local_experts * world]`: per router CTA and expert, the tokens of its share
    /// that picked the expert, then the tokens the expert leads on its rank (each router CTA's
    /// prefix over the others' is where its positions and records start).
    pub route_part: u32,
    /// Words in all.
    pub words: u32,
}

impl MoeScratch {
    /// The layout for these sizes.
    pub const fn new(local_experts: u32, world: u32, cap_rows: u32, routers: u32) -> Self {
        let el = local_experts;
        let mt = cap_rows.div_ceil(MOE_TILE_M);
        let expert_off = 8 * FLAG_STRIDE;
        let expert_rows = expert_off + el + 1;
        let tile_start = expert_rows + el;
        let recv_counts = tile_start + el + 1;
        let src_off = recv_counts + world * el;
        let items = src_off + world * el;
        let m_expert = items + world + 2;
        let m_target = m_expert + mt;
        let m_count = m_target + mt;
        let route_part = m_count + mt;
        Self {
            expert_off,
            expert_rows,
            tile_start,
            recv_counts,
            src_off,
            items,
            m_expert,
            m_target,
            m_count,
            route_part,
            words: route_part + 2 * routers * el * world,
        }
    }
    /// Word of router CTA `c`'s count for expert `e` (of `experts`; `lead`: of the tokens it
    /// leads), for `routers` router CTAs.
    pub const fn route_part_at(&self, lead: bool, c: u32, e: u32, routers: u32, experts: u32) -> u32 {
        self.route_part + (lead as u32 * routers + c) * experts + e
    }
    /// Word of the local layout flag.
    pub const LAYOUT_FLAG: u32 = 0;
    /// Word of the pull CTAs' finish counter.
    pub const FINISH_COUNTER: u32 = FLAG_STRIDE;
    /// Word of the `x_heap` copy items' counter.
    pub const X_COUNTER: u32 = 2 * FLAG_STRIDE;
    /// Word of the router CTAs' first barrier: every share of the routing counted.
    pub const COUNTED_BARRIER: u32 = 3 * FLAG_STRIDE;
    /// Word of the router CTAs' second barrier, two arrivals per router CTA a launch (its epochs
    /// are twice the launch's): every record in the outbox (`2 epoch - 1`), then every share of
    /// them shipped to this node's peers (`2 epoch`: the last CTA raises the flags).
    pub const RECORDS_BARRIER: u32 = 4 * FLAG_STRIDE;
    /// Word of the next pull item to hand out.
    pub const ITEM_COUNTER: u32 = 5 * FLAG_STRIDE;
    /// Word of the pull items finished.
    pub const ITEMS_DONE: u32 = 6 * FLAG_STRIDE;
    /// Words of the tile counters with [`MOE_JOIN`] (`sched::Claimed`: the next position, the
    /// CTAs done drawing; zero between launches).
    pub const TILE_COUNTERS: u32 = 7 * FLAG_STRIDE;
}

/// Attention tensors are `[batch, seq, heads, head_dim]` (the layout of a transformer's
/// projections before any transpose).
pub const ATTN_BSHD: u32 = 0;
/// Attention tensors are `[batch, heads, seq, head_dim]` (torch SDPA's layout).
pub const ATTN_BHSD: u32 = 1;

abi_struct! {
    /// Flash-attention forward: `O = softmax(scale * Q K^T + mask) V` per (batch, query head), and
    /// the log-sum-exp of each query row. Query head `h` reads key/value head `h / (heads /
    /// heads_kv)` (grouped-query attention). Tensor maps are rank 4 with dimensions ordered as
    /// `layout` stores them, innermost first: `[D, H, S, B]` for [`ATTN_BSHD`], `[D, S, H, B]` for
    /// [`ATTN_BHSD`]; Q, K and V boxes are 64 x 1 x 128 x 1 (64 x 128 x 1 x 1), O boxes 64 rows.
    pub struct AttnParams [152] {
        /// Device address of Q's tensor map (`seq_q` rows per head).
        pub q_map: u64,
        /// Device address of K's tensor map (`seq_k` rows per key/value head).
        pub k_map: u64,
        /// Device address of V's tensor map (as K's).
        pub v_map: u64,
        /// Device address of O's tensor map (as Q's, 64-row boxes).
        pub o_map: u64,
        /// Device address of the log-sum-exp, `[batch, heads, seq_q]` f32 (natural log); 0: not
        /// written.
        pub lse: u64,
        /// Where a timed-out wait reports.
        pub diag: Diag,
        /// Bound on every device-side wait, in ns.
        pub timeout_ns: u64,
        /// Batch size.
        pub batch: u32,
        /// Query heads.
        pub heads: u32,
        /// Key/value heads (divides `heads`).
        pub heads_kv: u32,
        /// Query rows per head.
        pub seq_q: u32,
        /// Key/value rows per head.
        pub seq_k: u32,
        /// [`ATTN_BSHD`] or [`ATTN_BHSD`].
        pub layout: u32,
        /// 1: key row `j` is visible to query row `i` only when `k_pos(j) <= q_pos(i)`; 0: every
        /// key is.
        pub causal: u32,
        /// The softmax scale times log2(e) (the kernel works in base 2).
        pub scale_log2: f32,
        /// Sequence positions of the query rows (for the causal mask).
        pub q_pos: SeqPos,
        /// Sequence positions of the key rows (a ring sets them per step).
        pub k_pos: SeqPos,
        /// Several steps (a ring): device address of the running output, `[batch, heads, seq_q,
        /// head_dim]` f32, normalised; 0 for one step.
        pub o_acc: u64,
        /// Several steps: device address of the running log-sum-exp, `[batch, heads, seq_q]` f32.
        pub lse_acc: u64,
        /// Device address of the tile scheduler's words, zero before the first launch: a `u64`
        /// launch counter (the epoch), then the `u32` ticket counter CTAs claim units of work
        /// from (never reset: each launch hands out `units + ctas` tickets).
        pub sched: u64,
        /// Several steps: device address of one `u32` per (tile, consumer warpgroup), raised
        /// when that warpgroup's rows of the tile's running output for a step are written (a later step's merge,
        /// possibly on another CTA, waits for it); 0 for one step.
        pub tile_flags: u64,
    }
}

abi_struct! {
    /// Where a tensor's rows sit in the whole sequence: row `x` is at position `base + x`, plus
    /// `jump` once `x >= split`. One contiguous shard: `split = u32::MAX`; a zigzag shard (two
    /// chunks of `c` rows, chunks `r` and `2W - 1 - r`): `base = r c`, `split = c`,
    /// `jump = (2W - 2 - 2r) c`. Positions only grow with `x`.
    pub struct SeqPos [12] {
        /// Position of row 0.
        pub base: u32,
        /// First row after the jump.
        pub split: u32,
        /// Positions skipped at `split`.
        pub jump: u32,
    }
}

impl SeqPos {
    /// Rows `0..` at positions `0..`.
    pub const IDENTITY: SeqPos = SeqPos { base: 0, split: u32::MAX, jump: 0 };

    /// Rank `rank`'s shard among `world`: rows `rank * chunk ..` when contiguous (`chunk` rows
    /// per rank), or zigzag chunks `rank` and `2 world - 1 - rank` of `chunk` rows each. The one
    /// definition of the ring's layout (the host's shard helpers use it too).
    #[inline(always)]
    pub const fn shard(rank: u32, world: u32, chunk: u32, zigzag: bool) -> SeqPos {
        if zigzag {
            SeqPos { base: rank * chunk, split: chunk, jump: (2 * world - 2 - 2 * rank) * chunk }
        } else {
            SeqPos { base: rank * chunk, split: u32::MAX, jump: 0 }
        }
    }

    /// The position of row `x`.
    #[inline(always)]
    pub const fn at(&self, x: u32) -> u32 {
        self.base + x + if x >= self.split { self.jump } else { 0 }
    }

    /// How many of the first `rows` rows sit at or before position `limit` (positions only grow,
    /// so they are a prefix).
    #[inline(always)]
    pub const fn rows_at_or_before(&self, limit: u32, rows: u32) -> u32 {
        if limit < self.base {
            return 0;
        }
        let before_split = limit - self.base + 1; // rows x < split with base + x <= limit
        let split = if self.split < rows { self.split } else { rows };
        if before_split < split {
            return before_split;
        }
        // All rows before the split; after it, base + x + jump <= limit.
        let after = if limit >= self.base + self.jump { limit - self.base - self.jump + 1 } else { 0 };
        let after = if after > rows { rows } else { after };
        if after > split {
            after
        } else {
            split
        }
    }
}

abi_struct! {
    /// Ring attention (sequence parallelism) in one persistent launch: rank `r` holds Q, K and V
    /// of its shard of the sequence; in step `s` its attention CTAs attend Q to the K/V of rank
    /// `(r - s) mod W` while its comm CTAs pass that K/V on to rank `r + 1`'s receive slot for
    /// step `s + 1` ([`RingAttnParams::slot`]; over NVLink, or through the FIFO and proxy to
    /// another node). Partial outputs merge by log-sum-exp into `attn.o_acc` / `attn.lse_acc`.
    ///
    /// Flags (`u32` words of each rank's `flags`, never reset, each raised to the launch epoch):
    /// [`RingAttnParams::READY`] is raised by rank `r + 1` when it enters the launch;
    /// `data(s)` by rank `r - 1` when step `s`'s K/V landed in its slot; `free(s)` by rank
    /// `r + 1` when it finished reading its slot of step `s` and, if it passes that K/V on
    /// ([`RingAttnParams::forwards`]), finished sending it too (only for a slot that a later
    /// step of the launch reuses, [`RingAttnParams::reused`]); `landed(s)` by rank `r + 1` on
    /// another node when what this rank sent in step `s` arrived there (the proxy reads the
    /// slot until then, so the slot is not free before).
    pub struct RingAttnParams [344] {
        /// The attention (Q, O, LSE maps, shape, mask, running output); its K/V maps are unused.
        pub attn: AttnParams,
        /// Device address of `2 (1 + slot_count)` K/V tensor maps: local K, local V, then K and V of
        /// each receive slot.
        pub kv_maps: u64,
        /// The proxy FIFO (several nodes).
        pub fifo: FifoParams,
        /// This rank's flags.
        pub flags: u64,
        /// Rank `r - 1`'s flags mapped over NVLink; 0 when it is on another node.
        pub prev_flags: u64,
        /// Rank `r + 1`'s flags mapped over NVLink; 0 when it is on another node.
        pub next_flags: u64,
        /// This rank's K then V (heap), `kv_bytes` in all.
        pub kv_local: u64,
        /// This rank's `slot_count` receive slots (heap), `kv_bytes` each.
        pub slots: u64,
        /// Rank `r + 1`'s receive slots mapped over NVLink; 0 when it is on another node.
        pub next_slots: u64,
        /// Heap offsets of `kv_local`, `slots` and `flags` (the same on every rank).
        pub kv_local_heap_off: u64,
        /// Heap offset of `slots`.
        pub slots_heap_off: u64,
        /// Heap offset of `flags`.
        pub flags_heap_off: u64,
        /// Device address of the launch counter (`u64`, the epoch's source).
        pub launches: u64,
        /// Device address of `3 * world` `u32` counters: parts (one consumer warpgroup's rows of a
        /// tile) done with step `s`, then comm CTAs done sending step `s`, then the two halves of
        /// a forwarded slot's release (read, sent) for step `s`.
        pub counters: u64,
        /// Bytes of K and V together (one slot).
        pub kv_bytes: u64,
        /// This rank.
        pub rank: u32,
        /// Ranks in the ring.
        pub world: u32,
        /// Rank `r + 1`.
        pub next: u32,
        /// Rank `r - 1`.
        pub prev: u32,
        /// Attention CTAs (the first of the grid).
        pub attn_ctas: u32,
        /// Comm CTAs (the rest): they claim attention units too once their sends are done.
        pub comm_ctas: u32,
        /// 1: shards are zigzag (chunks `r` and `2W - 1 - r` of `chunk` rows); 0: contiguous.
        pub zigzag: u32,
        /// Rows of one zigzag chunk (`seq / 2`), or of the shard when contiguous.
        pub chunk: u32,
        /// Receive slots, 2 ..= `world - 1` (1 at `world` 2 or less; one slot cannot work when
        /// K/V is passed on): with `world - 1` no slot is reused within a launch, so no send
        /// waits for the next rank to finish a step.
        pub slot_count: u32,
        /// Tiles walked one step per unit (`attn_tiles::Units`); the other tiles are one unit
        /// over all steps, which keeps its running output in registers. All tiles (or more)
        /// when a slot is reused: then a step's slot is given back only once every tile read
        /// it, so no unit may hold one step while it waits for a later one.
        pub split_tiles: u32,
    }
}

impl RingAttnParams {
    /// Flag word raised by rank `r + 1` when it entered the launch.
    pub const READY: u32 = 0;
    /// Flag word of step `s`'s data (raised by rank `r - 1`).
    pub const fn data(s: u32) -> u32 {
        1 + s
    }
    /// Flag word of rank `r + 1` having read its slot of step `s`.
    pub const fn free(&self, s: u32) -> u32 {
        1 + self.world + s
    }
    /// Flag word of rank `r + 1` (on another node) having received what this rank sent in step
    /// `s`.
    pub const fn landed(&self, s: u32) -> u32 {
        1 + 2 * self.world + s
    }
    /// Flag words per rank.
    pub const fn flag_words(world: u32) -> u32 {
        1 + 3 * world
    }
    /// Counter words per rank (see `counters`).
    pub const fn counter_words(world: u32) -> u32 {
        3 * world
    }
    /// Whether step `s`'s K/V, read from a receive slot, is also passed on to rank `r + 1`: then
    /// the slot is free only once both the reading and the sending are done.
    pub const fn forwards(&self, s: u32) -> bool {
        s >= 1 && s + 1 < self.world
    }
    /// The receive slot that holds step `s`'s K/V (`s >= 1`; step 0 reads this rank's own).
    pub const fn slot(&self, s: u32) -> u32 {
        // Zero slots never launch; the guard keeps a division panic out of the kernel.
        let n = if self.slot_count == 0 { 1 } else { self.slot_count };
        s.wrapping_sub(1) % n
    }
    /// Whether a later step of the launch reuses step `s`'s receive slot: only then must its
    /// reader tell the writer it is done (`free(s)`).
    pub const fn reused(&self, s: u32) -> bool {
        s >= 1 && s + self.slot_count < self.world
    }
    /// The flag word a rank waits for, on rank `r + 1`, before sending it step `s + 1`'s K/V:
    /// `free` of the step that last used that slot in this launch, or [`RingAttnParams::READY`]
    /// (the slot's first use: rank `r + 1` entered the launch, so its previous one is over).
    pub const fn send_gate(&self, s: u32) -> u32 {
        if s + 1 > self.slot_count {
            self.free(s + 1 - self.slot_count)
        } else {
            Self::READY
        }
    }
    /// The rank whose K/V this rank holds in step `s`.
    pub const fn source(&self, s: u32) -> u32 {
        // A zero world never launches; the guard keeps a division panic out of the kernel.
        let w = if self.world == 0 { 1 } else { self.world };
        (self.rank + w - s % w) % w
    }
    /// Positions of rank `src`'s rows in the whole sequence.
    pub const fn positions(&self, src: u32) -> SeqPos {
        SeqPos::shard(src, self.world, self.chunk, self.zigzag != 0)
    }
}
