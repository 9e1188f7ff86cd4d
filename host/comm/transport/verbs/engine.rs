//! The RDMA protocol of the verbs transport, apart from the verbs calls themselves: which work
//! requests a FIFO command becomes, on which queue pair and NIC, which of them are signalled,
//! when a flag may be written, and the host-staged path. It drives a [`Nic`] (real:
//! `ibv_post_send`, `ibv_post_recv`, `ibv_poll_cq`) and a [`Mem`] (real: CUDA copies on a
//! stream), so every rule here runs in the unit tests against a simulated fabric that reorders
//! across queue pairs (RC) or within them too (SRD).
//!
//! Lanes and rails: a peer is reached through `lanes` QPs; lane `l` lives on this rank's NIC
//! (rail) `l % rails` and targets the peer's NIC `l % rails`. Every registered region has one
//! key per rail.
//!
//! Direct mode, in-order delivery (RC; GPU memory registered with the NIC):
//! - A command's data goes out in messages of at most `max_msg` bytes. Below `stripe_min` bytes
//!   it all goes on lane 0, the peer's first QP; larger data is split over `lanes` QPs.
//! - Flags always go on lane 0, in command order, as 4-byte inline writes. A flag covers all
//!   data sent to that peer before it (kernels send chunks without flags and raise one flag at
//!   the end). RC delivers a QP's writes in order, so lane-0 data needs nothing more. Other lanes
//!   have no order with lane 0: for each lane with unretired requests the flag needs the
//!   completion of its last request (signalled when it is a flagged command's last message, else
//!   a zero-length signalled write is added behind it), and it waits for those in a per-peer
//!   queue, so flags never pass each other. A completion means the responder acknowledged the
//!   write, that is, it placed the data; its later write of the flag reaches memory after it.
//! - Selective signalling per QP: every `signal_every`-th request is signalled (and any request
//!   that would fill the send queue); a signalled completion retires every request before it on
//!   that QP. A QP never holds more than `sq_depth` requests.
//! - FENCE / flush: a zero-length signalled write on every QP with unretired requests, then wait
//!   until every QP retired everything and every flag is out.
//!
//! Direct mode, unordered delivery (EFA SRD: reliable, but any order, even within one QP, and a
//! completion says nothing about the requests before it):
//! - Every request is signalled and a completion retires exactly one request.
//! - Every data message is a WRITE WITH IMMEDIATE naming its data unit; the
//!   receiver counts them (see [`super::arrival`]). A flag travels as a header-only *flag record* through the slot ring
//!   below, carrying how many data units it covers; the receiver's proxy raises the flag (on its
//!   CUDA stream) once that many have landed, in record order.
//!
//! Staged mode (NICs that cannot register GPU memory; all ranks agree on it): every rank owns a
//! pinned host staging area with, per peer, a send ring and a receive ring of `slots` slots of
//! `slot_bytes` (a 64-byte header, then payload) and a credit word. The sender copies a piece
//! GPU -> its send slot, then RDMA-writes the slot to the same slot of the peer's receive ring
//! *with immediate* (the piece's sequence number), on lane 0. The receiver processes pieces in
//! sequence order whatever order they land in ([`Arrivals`]): it copies the payload to
//! its GPU buffer (resolved with its own buffer table), then raises the flag on the same CUDA
//! stream, and when both are done returns a credit (a write of its freed-slot count into the
//! sender's credit word; on unordered transports at most one credit write per peer is in flight,
//! so they cannot land out of order). A slot is reused only after its credit. Unordered direct
//! mode uses the same ring, with header-only pieces, for its flag records.
//!
//! Every `offset + length` is computed with checked arithmetic: a range past its region, or one
//! whose end overflows, is [`CommError::OutOfBounds`] in debug and release builds alike.
use super::arrival::{Arrivals, Imm};
use crate::abi::{FifoCmd, OP_FENCE, OP_SIGNAL, OP_WRITE};
use crate::comm::error::{CommError, CommResult};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub(crate) fn err(what: impl Into<String>) -> CommError {
    CommError::Transport { transport: "verbs", what: what.into() }
}

/// A registered buffer: where it is and its key on every rail (index = rail; a key of 0 or a
/// missing entry: not registered there).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Region {
    /// Its address (GPU or pinned host), in its owner's address space.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// Local key (own regions) or remote key (peers' regions) by rail.
    pub keys: Vec<u32>,
}

impl Region {
    /// The address of bytes `off..off + len`, checked without overflow; `name` names the region
    /// in the error.
    pub fn range(&self, name: impl FnOnce() -> String, off: u64, len: u64) -> CommResult<u64> {
        match off.checked_add(len) {
            Some(end) if end <= self.len => Ok(self.addr.wrapping_add(off)),
            _ => Err(CommError::OutOfBounds { transport: "verbs", region: name(), off, len, size: self.len }),
        }
    }

    /// The key on `rail` (0: none).
    pub fn key(&self, rail: usize) -> u32 {
        self.keys.get(rail).copied().unwrap_or(0)
    }
}

/// A registered buffer a peer may write, as exchanged through the bootstrap (one per rail).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
pub struct RemoteRegion {
    /// Its address in the owner's address space (GPU or pinned host), the target of RDMA writes.
    pub addr: u64,
    /// Its length in bytes.
    pub len: u64,
    /// The key a writer must present (0: not registered, e.g. GPU buffers in staged mode).
    pub rkey: u32,
    /// Padding to 24 bytes, so the struct is `Pod` and travels as raw bytes; always 0.
    pub _pad: u32,
}
const _: () = assert!(std::mem::size_of::<RemoteRegion>() == 24);

/// One send work request's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WrOp {
    /// RDMA WRITE of `len` bytes.
    Write {
        /// Source address (registered local memory).
        local: u64,
        /// Key of the source's registration.
        lkey: u32,
        /// Bytes to write (at most `max_msg`).
        len: u32,
        /// Destination address in the peer's memory.
        remote: u64,
        /// Key of the destination's registration.
        rkey: u32,
    },
    /// RDMA WRITE of a 4-byte value carried inline in the request.
    WriteU32 {
        /// The value written (a flag value, a credit count).
        value: u32,
        /// Destination address in the peer's memory.
        remote: u64,
        /// Key of the destination's registration.
        rkey: u32,
    },
    /// RDMA WRITE WITH IMMEDIATE: the peer consumes a posted receive and learns `imm`.
    WriteImm {
        /// Source address (a send slot, or GPU data in unordered direct mode).
        local: u64,
        /// Key of the source's registration.
        lkey: u32,
        /// Bytes to write.
        len: u32,
        /// Destination address in the peer's memory.
        remote: u64,
        /// Key of the destination's registration.
        rkey: u32,
        /// The immediate the peer receives ([`Imm`]).
        imm: u32,
    },
    /// A zero-length RDMA WRITE, always signalled: retires everything before it on an RC QP.
    Nop,
}

/// A send work request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WorkRequest {
    /// Identifies the request in its completion: the QP index above bit 40, the request's
    /// sequence number on that QP below.
    pub wr_id: u64,
    /// What the request does.
    pub op: WrOp,
    /// Whether it produces a completion (else it is retired by a later signalled one).
    pub signaled: bool,
}

/// What a completion reports.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum CompletionKind {
    /// A signalled send request finished (in-order transports: and every request before it).
    Send {
        /// The `wr_id` of the signalled request.
        wr_id: u64,
    },
    /// A WRITE WITH IMMEDIATE from the peer landed; a posted receive was consumed.
    RecvImm {
        /// The immediate the sender attached ([`Imm`]).
        imm: u32,
    },
}

/// A work completion; `error` is the NIC's status text when it failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// The QP it came from (`rank * lanes + lane`).
    pub qp: usize,
    /// What finished.
    pub kind: CompletionKind,
    /// The NIC's status text; `None` on success.
    pub error: Option<String>,
}

/// The verbs the engine needs. QPs are numbered `rank * lanes + lane`.
pub trait Nic {
    /// Post one send request on QP `qp` (never blocks; the engine keeps the queue within
    /// `sq_depth`).
    fn post_send(&mut self, qp: usize, wr: &WorkRequest) -> CommResult<()>;
    /// Post `n` receives (no buffers: they only catch immediates).
    fn post_recv(&mut self, qp: usize, n: u32) -> CommResult<()>;
    /// Append available completions to `out`.
    fn poll(&mut self, out: &mut Vec<Completion>) -> CommResult<()>;
}

/// Memory operations of the receiving proxy and the staged path. Asynchronous ones return a
/// token; they complete in token order (one CUDA stream), and `done()` is the number completed
/// so far.
pub trait Mem {
    /// Copy `len` bytes (GPU or pinned host, unified addresses).
    fn copy(&mut self, dst: u64, src: u64, len: u64) -> CommResult<u64>;
    /// Write a 4-byte flag to GPU memory after everything enqueued before.
    fn set_u32(&mut self, dst: u64, value: u32) -> CommResult<u64>;
    /// How many of the asynchronous operations have completed: token `t` is done once this
    /// exceeds `t`.
    fn done(&mut self) -> CommResult<u64>;
    /// Synchronous CPU access to the (host) staging area.
    fn write_host(&mut self, addr: u64, data: &[u8]);
    /// Read `out.len()` bytes of the staging area at `addr` (e.g. a slot header, a credit word).
    fn read_host(&self, addr: u64, out: &mut [u8]);
}

/// How the transport delivers a QP's writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delivery {
    /// In posting order per QP, completions cumulative (InfiniBand / RoCE RC).
    InOrder,
    /// Reliable but in any order, even within a QP; a completion retires one request (EFA SRD).
    Unordered,
}

/// Tuning of the engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// QPs per peer.
    pub lanes: u32,
    /// Send-queue depth of every QP.
    pub sq_depth: u32,
    /// Signal every n-th request of a QP (in-order delivery; unordered signals every request).
    pub signal_every: u32,
    /// Largest single RDMA message.
    pub max_msg: u64,
    /// Data of at least this many bytes is split over all lanes.
    pub stripe_min: u64,
    /// Bound on every wait for the NIC (send queue space, completions, credits).
    pub timeout: Duration,
    /// Host-staged mode.
    pub staged: Option<StagedConfig>,
    /// How the transport orders delivery.
    pub delivery: Delivery,
    /// The NICs (rails) of this rank, by rail index, named in reports; lane `l` uses rail
    /// `l % rails.len()`.
    pub rails: Vec<String>,
    /// Geometry of the flag-record ring of unordered direct mode.
    pub records: StagedConfig,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            lanes: 2,
            sq_depth: 1024,
            signal_every: 64,
            max_msg: 1 << 20,
            stripe_min: 1 << 20,
            timeout: Duration::from_secs(10),
            staged: None,
            delivery: Delivery::InOrder,
            rails: vec!["nic0".into()],
            records: StagedConfig { slots: 64, slot_bytes: 128 },
        }
    }
}

impl EngineConfig {
    /// Check the rules between fields (named in the error).
    pub fn validate(&self) -> CommResult<()> {
        let bad = |arg, rule: String| Err(CommError::InvalidArgument { arg, rule });
        if self.lanes == 0 || self.lanes > 16 {
            return bad("lanes", format!("{} QPs per peer; must be 1..=16", self.lanes));
        }
        if self.signal_every == 0 || self.signal_every >= self.sq_depth {
            return bad("signal_every", format!("{} must be in 1..sq_depth ({})", self.signal_every, self.sq_depth));
        }
        if self.max_msg < 64 || self.max_msg > 1 << 31 {
            return bad("max_msg", format!("{} must be in 64..=2^31", self.max_msg));
        }
        if self.rails.is_empty() || self.rails.len() > self.lanes as usize {
            let rule = format!(
                "{} NICs for {} lanes; need 1..=lanes (every NIC carries a lane)",
                self.rails.len(),
                self.lanes
            );
            return bad("rails", rule);
        }
        for (arg, ring) in [("staged", self.staged), ("records", self.ring())] {
            if let Some(s) = ring {
                if s.slots == 0
                    || s.slots > 1 << 20
                    || s.slot_bytes < 2 * STAGED_HEADER as u32
                    || s.slot_bytes % 64 != 0
                {
                    let rule = format!("{s:?}: need slots in 1..=2^20 and slot_bytes a multiple of 64, >= 128");
                    return bad(arg, rule);
                }
            }
        }
        Ok(())
    }

    /// The slot ring in use: the staged payload ring, else (unordered direct) the flag-record
    /// ring, else none.
    pub fn ring(&self) -> Option<StagedConfig> {
        self.staged.or((self.delivery == Delivery::Unordered).then_some(self.records))
    }

    /// Receives each QP needs posted: slot pieces on lane 0, data units on every lane
    /// (unordered direct mode; at most `sq_depth` in flight per QP).
    pub fn recv_depth(&self, lane: u32) -> u32 {
        let slots = if lane == 0 { self.ring().map_or(0, |s| s.slots) } else { 0 };
        let data = if self.delivery == Delivery::Unordered && self.staged.is_none() { self.sq_depth } else { 0 };
        slots + data
    }
}

/// A slot ring's geometry, per peer and direction (host-staged payloads or flag records).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedConfig {
    /// Slots per ring (the most pieces in flight to one peer before a credit returns).
    pub slots: u32,
    /// Bytes per slot: the [`STAGED_HEADER`], then payload. A multiple of 64, at least 128.
    pub slot_bytes: u32,
}

/// Bytes of a slot's header.
pub const STAGED_HEADER: u64 = 64;

impl StagedConfig {
    fn ring_bytes(&self) -> u64 {
        self.slots as u64 * self.slot_bytes as u64
    }
    /// Staging bytes per peer: send ring, receive ring, credit word (padded).
    pub fn per_peer(&self) -> u64 {
        2 * self.ring_bytes() + 64
    }
    /// Staging bytes for a world of `world` ranks.
    pub fn total(&self, world: u32) -> u64 {
        self.per_peer() * world as u64
    }
    fn send_slot(&self, base: u64, peer: u32, slot: u32) -> u64 {
        base + peer as u64 * self.per_peer() + slot as u64 * self.slot_bytes as u64
    }
    fn recv_slot(&self, base: u64, peer: u32, slot: u32) -> u64 {
        self.send_slot(base, peer, slot) + self.ring_bytes()
    }
    fn credit(&self, base: u64, peer: u32) -> u64 {
        base + peer as u64 * self.per_peer() + 2 * self.ring_bytes()
    }
}

/// The header of a slot piece (its first bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
struct SlotHeader {
    /// The command's destination location (FIFO buffer id and offset, resolved by the receiver).
    dst: u64,
    /// Where this piece starts inside the command's data.
    skip: u64,
    bytes: u64,
    /// Flag location (0: none) and value.
    flag: u64,
    /// Data units the flag covers (unordered direct mode; 0 otherwise).
    covers: u64,
    flag_value: u32,
    _pad: u32,
}
const _: () = assert!(std::mem::size_of::<SlotHeader>() as u64 <= STAGED_HEADER);

/// The staging area of this rank and where the peers' areas are.
#[derive(Clone, Debug)]
pub struct Staging {
    /// This rank's area, registered with the NIC (a key per rail; lane 0's rail is used).
    pub local: Region,
    /// Every rank's area by rank (no key: that rank has none).
    pub remote: Vec<Region>,
}

#[derive(Default)]
struct QpState {
    /// Requests posted / retired (a retired request finished; sequence numbers start at 1).
    /// In-order delivery: `retired` is the highest retired sequence; unordered: a count.
    posted: u64,
    retired: u64,
    /// Sequence number of the last signalled request.
    last_signaled: u64,
    since_signal: u32,
}

struct PendingFlag {
    op: WrOp,
    /// (lane, sequence) completions needed first.
    need: Vec<(u32, u64)>,
}

struct StagedPiece {
    seq: u64,
    len: u64,
    token: u64,
}

struct Peer {
    flags: VecDeque<PendingFlag>,
    // Slot sender: pieces ever sent, pieces waiting for their GPU -> host copy.
    sent: u64,
    outgoing: VecDeque<StagedPiece>,
    // Unordered direct sender: data units sent.
    units_sent: u64,
    // Receiver: what landed, slots whose memory operations are enqueued (token), slots freed
    // and credited, the credit write in flight (unordered delivery).
    arrivals: Arrivals,
    incoming: VecDeque<u64>,
    freed: u32,
    credited: u32,
    credit_wr: Option<u64>,
}

/// Counters of the engine.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EngineStats {
    /// Send requests posted, on every QP (zero-length writes and flags included).
    pub send_wrs: u64,
    /// How many of them were signalled.
    pub signaled: u64,
    /// Payload bytes sent: data messages in direct mode, piece payloads in staged mode (headers
    /// and flags not counted).
    pub bytes: u64,
    /// Slot pieces sent (staged payloads and flag records, one slot each).
    pub staged_pieces: u64,
    /// Slot pieces received from peers and processed.
    pub staged_received: u64,
    /// Data units sent with an immediate (unordered direct mode).
    pub data_units_sent: u64,
    /// Data units received (unordered direct mode).
    pub data_units_received: u64,
    /// Flags this rank's proxy raised in its own GPU memory for peers (records and staged).
    pub flags_raised: u64,
}

/// The protocol state of one rank (see the module docs).
pub struct Engine {
    cfg: EngineConfig,
    /// This rank (its block in every peer's staging area).
    me: u32,
    /// Which ranks have QPs (other nodes), as flags by rank and as a list.
    remote_ranks: Vec<bool>,
    ranks: Vec<u32>,
    local: Vec<Region>,
    remote: Vec<Vec<Region>>,
    staging: Option<Staging>,
    qps: Vec<QpState>,
    peers: Vec<Peer>,
    completions: Vec<Completion>,
    /// Counters since [`Engine::new`].
    pub stats: EngineStats,
}

impl Engine {
    /// `remote_ranks[r]`: rank r is reached through QPs. `local`/`remote`: registered buffers by
    /// FIFO buffer id (`remote` is used in direct mode; staged receivers resolve with `local`).
    pub fn new(
        cfg: EngineConfig,
        me: u32,
        remote_ranks: Vec<bool>,
        local: Vec<Region>,
        remote: Vec<Vec<Region>>,
        staging: Option<Staging>,
    ) -> CommResult<Self> {
        cfg.validate()?;
        if cfg.ring().is_some() != staging.is_some() {
            return Err(err("staged mode and unordered delivery need a staging area (and only they have one)"));
        }
        let world = remote_ranks.len();
        let qps = (0..world * cfg.lanes as usize).map(|_| QpState::default()).collect();
        let slots = cfg.ring().map_or(1, |s| s.slots);
        let peers = (0..world)
            .map(|_| Peer {
                flags: VecDeque::new(),
                sent: 0,
                outgoing: VecDeque::new(),
                units_sent: 0,
                arrivals: Arrivals::new(slots),
                incoming: VecDeque::new(),
                freed: 0,
                credited: 0,
                credit_wr: None,
            })
            .collect();
        let ranks = (0..world as u32).filter(|&r| remote_ranks[r as usize]).collect();
        Ok(Self {
            cfg,
            me,
            remote_ranks,
            ranks,
            local,
            remote,
            staging,
            qps,
            peers,
            completions: Vec::new(),
            stats: EngineStats::default(),
        })
    }

    /// Whether this engine runs host-staged.
    pub fn staged(&self) -> bool {
        self.cfg.staged.is_some()
    }

    fn unordered(&self) -> bool {
        self.cfg.delivery == Delivery::Unordered
    }

    /// Arm the receive side (every QP gets [`EngineConfig::recv_depth`] receives; credit words
    /// zeroed). Call before the peers may send (the closing barrier).
    pub fn start(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        for &r in &self.ranks {
            if let (Some(s), Some(st)) = (self.cfg.ring(), &self.staging) {
                mem.write_host(s.credit(st.local.addr, r), &[0; 4]);
            }
            for lane in 0..self.cfg.lanes {
                let n = self.cfg.recv_depth(lane);
                if n > 0 {
                    nic.post_recv(self.qp(r, lane), n)?;
                }
            }
        }
        Ok(())
    }

    fn is_remote(&self, rank: u32) -> bool {
        self.remote_ranks.get(rank as usize).copied().unwrap_or(false)
    }

    fn qp(&self, rank: u32, lane: u32) -> usize {
        (rank * self.cfg.lanes + lane) as usize
    }

    fn rail(&self, lane: u32) -> usize {
        lane as usize % self.cfg.rails.len()
    }

    /// `rank R lane L (NIC name)`, for reports.
    fn qp_name(&self, qp: usize) -> String {
        let (rank, lane) = (qp as u32 / self.cfg.lanes, qp as u32 % self.cfg.lanes);
        format!("rank {rank} lane {lane} (NIC {})", self.cfg.rails[self.rail(lane)])
    }

    /// Carry out FIFO commands, in order.
    pub fn post(&mut self, cmds: &[FifoCmd], nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        for c in cmds {
            if c.op() == OP_FENCE {
                self.flush(nic, mem)?;
                continue;
            }
            let dst = c.dst_rank();
            if !self.is_remote(dst) {
                return Err(err(format!("command for rank {dst}: not a rank on another node (no QP)")));
            }
            if !matches!(c.op(), OP_WRITE | OP_SIGNAL) {
                return Err(err(format!("unknown opcode {}", c.op())));
            }
            if self.cfg.staged.is_some() {
                self.post_staged(c, nic, mem)?;
            } else {
                self.post_direct(c, nic, mem)?;
            }
        }
        self.progress(nic, mem)
    }

    fn resolve_remote(&self, dst: u32, loc: u64, len: u64, rail: usize) -> CommResult<(u64, u32)> {
        let (id, off) = FifoCmd::split(loc);
        let regions = self.remote.get(dst as usize).ok_or_else(|| err(format!("no regions known for rank {dst}")))?;
        let r = regions.get(id as usize).ok_or_else(|| err(format!("rank {dst} registered no buffer {id}")))?;
        let addr = r.range(|| format!("rank {dst} buffer {id}"), off, len)?;
        match r.key(rail) {
            0 => Err(err(format!("rank {dst} buffer {id} is not registered on its NIC {rail}"))),
            k => Ok((addr, k)),
        }
    }

    /// Local bytes `skip..skip + len` of the range starting at `loc`.
    fn resolve_local(&self, loc: u64, skip: u64, len: u64, rail: usize) -> CommResult<(u64, u32)> {
        let (id, off) = FifoCmd::split(loc);
        let r = self.local.get(id as usize).ok_or_else(|| err(format!("local buffer {id} not registered")))?;
        let name = || format!("local buffer {id}");
        let off = off.checked_add(skip).ok_or_else(|| CommError::OutOfBounds {
            transport: "verbs",
            region: name(),
            off,
            len: skip,
            size: r.len,
        })?;
        Ok((r.range(name, off, len)?, r.key(rail)))
    }

    fn post_direct(&mut self, c: &FifoCmd, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let dst = c.dst_rank();
        let unordered = self.unordered();
        if c.op() == OP_WRITE && c.bytes > 0 {
            let lanes = if c.bytes >= self.cfg.stripe_min { self.cfg.lanes as u64 } else { 1 };
            // Check every lane's rail before posting anything, so a bad command posts nothing.
            let mut ends = Vec::with_capacity(lanes as usize);
            for lane in 0..lanes as u32 {
                let rail = self.rail(lane);
                ends.push((
                    self.resolve_local(c.src, 0, c.bytes, rail)?,
                    self.resolve_remote(dst, c.dst, c.bytes, rail)?,
                ));
            }
            // Lane j takes one contiguous share (64-byte multiples), sent in max_msg messages.
            let share = c.bytes.div_ceil(lanes).div_ceil(64) * 64;
            for (lane, &((src, lkey), (to, rkey))) in ends.iter().enumerate() {
                let lane = lane as u64;
                let (start, end) =
                    (lane.saturating_mul(share).min(c.bytes), (lane + 1).saturating_mul(share).min(c.bytes));
                let mut off = start;
                while off < end {
                    let n = (end - off).min(self.cfg.max_msg);
                    let last = off + n == end;
                    let (local, remote, len) = (src + off, to + off, n as u32);
                    let op = if unordered {
                        let p = &mut self.peers[dst as usize];
                        let imm = Imm::data(p.units_sent);
                        p.units_sent += 1;
                        self.stats.data_units_sent += 1;
                        WrOp::WriteImm { local, lkey, len, remote, rkey, imm }
                    } else {
                        WrOp::Write { local, lkey, len, remote, rkey }
                    };
                    // In order: a flagged command's last message on a non-zero lane is
                    // signalled: its flag will wait for that completion.
                    let signal = last && lane > 0 && c.flag != 0;
                    self.post_wr(nic, mem, self.qp(dst, lane as u32), op, signal)?;
                    self.stats.bytes += n;
                    off += n;
                }
            }
        }
        if c.flag == 0 {
            return Ok(());
        }
        if unordered {
            // The receiver raises it once every data unit sent before it has landed.
            let h = SlotHeader {
                flag: c.flag,
                flag_value: c.flag_value as u32,
                covers: self.peers[dst as usize].units_sent,
                ..Default::default()
            };
            return self.post_piece(dst, h, None, nic, mem);
        }
        let (remote, rkey) = self.resolve_remote(dst, c.flag, 4, 0)?;
        let mut need = Vec::new();
        for lane in 1..self.cfg.lanes {
            let qp = self.qp(dst, lane);
            let q = &self.qps[qp];
            if q.posted > q.retired {
                let seq =
                    if q.last_signaled == q.posted { q.posted } else { self.post_wr(nic, mem, qp, WrOp::Nop, true)? };
                need.push((lane, seq));
            }
        }
        let op = WrOp::WriteU32 { value: c.flag_value as u32, remote, rkey };
        self.peers[dst as usize].flags.push_back(PendingFlag { op, need });
        self.release_flags(dst, nic, mem)
    }

    /// Post the peer's queued flags whose data is known to be placed, in order (in-order
    /// delivery only).
    fn release_flags(&mut self, dst: u32, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        loop {
            let ready = match self.peers[dst as usize].flags.front() {
                Some(f) => f.need.iter().all(|&(lane, seq)| self.qps[self.qp(dst, lane)].retired >= seq),
                None => return Ok(()),
            };
            if !ready {
                return Ok(());
            }
            let f = self.peers[dst as usize].flags.pop_front().expect("front checked above");
            self.post_wr(nic, mem, self.qp(dst, 0), f.op, false)?;
        }
    }

    /// Post one request, keeping the send queue within its depth. Returns its sequence number.
    fn post_wr(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem, qp: usize, op: WrOp, force: bool) -> CommResult<u64> {
        let depth = self.cfg.sq_depth as u64;
        if self.qps[qp].posted - self.qps[qp].retired >= depth {
            let start = Instant::now();
            while self.qps[qp].posted - self.qps[qp].retired >= depth {
                self.poll(nic, mem)?;
                self.check_time(start, || format!("send queue of QP {qp} full ({depth} requests)"))?;
            }
        }
        let unordered = self.unordered();
        let q = &mut self.qps[qp];
        let seq = q.posted + 1;
        // Signal on schedule (signal_every < sq_depth, so a full queue always holds a signalled
        // request whose completion frees it), on request, for a Nop, and always when unordered
        // (a completion there retires only its own request).
        let signaled = unordered || force || matches!(op, WrOp::Nop) || q.since_signal + 1 >= self.cfg.signal_every;
        nic.post_send(qp, &WorkRequest { wr_id: (qp as u64) << 40 | seq, op, signaled })?;
        q.posted = seq;
        q.since_signal = if signaled { 0 } else { q.since_signal + 1 };
        if signaled {
            q.last_signaled = seq;
        }
        self.stats.send_wrs += 1;
        self.stats.signaled += signaled as u64;
        Ok(seq)
    }

    fn check_time(&mut self, start: Instant, what: impl FnOnce() -> String) -> CommResult<()> {
        if start.elapsed() > self.cfg.timeout {
            return Err(err(format!("rank {}: {} after {:?}; {}", self.me, what(), self.cfg.timeout, self.describe())));
        }
        Ok(())
    }

    /// Where every QP and peer stands, for timeout reports.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for &r in &self.ranks {
            for lane in 0..self.cfg.lanes {
                let qp = self.qp(r, lane);
                let q = &self.qps[qp];
                if q.posted != q.retired {
                    s += &format!("{}: posted {} retired {}; ", self.qp_name(qp), q.posted, q.retired);
                }
            }
            let p = &self.peers[r as usize];
            if !p.flags.is_empty() || p.sent != 0 || p.freed != 0 || p.units_sent != 0 || p.arrivals.data_units() != 0 {
                s += &format!(
                    "rank {r}: {} flags waiting, pieces sent {} (waiting {}), pieces processed {} (freed {}, credited {}), data units sent {} landed {}; ",
                    p.flags.len(),
                    p.sent,
                    p.outgoing.len(),
                    p.arrivals.pieces(),
                    p.freed,
                    p.credited,
                    p.units_sent,
                    p.arrivals.data_units(),
                );
            }
        }
        if s.is_empty() {
            "nothing outstanding".into()
        } else {
            s
        }
    }

    fn poll(&mut self, nic: &mut dyn Nic, _mem: &mut dyn Mem) -> CommResult<()> {
        let mut comps = std::mem::take(&mut self.completions);
        comps.clear();
        nic.poll(&mut comps)?;
        for c in &comps {
            if c.qp >= self.qps.len() {
                return Err(err(format!("completion for QP {}, but only {} exist", c.qp, self.qps.len())));
            }
            if let Some(e) = &c.error {
                return Err(err(format!("work completion failed on QP {} ({}): {e}", c.qp, self.qp_name(c.qp))));
            }
            match c.kind {
                CompletionKind::Send { wr_id } => self.retire(c.qp, wr_id)?,
                CompletionKind::RecvImm { imm } => self.on_imm(c.qp, imm, nic)?,
            }
        }
        self.completions = comps;
        Ok(())
    }

    fn retire(&mut self, at: usize, wr_id: u64) -> CommResult<()> {
        let (qp, seq) = ((wr_id >> 40) as usize, wr_id & ((1 << 40) - 1));
        let unordered = self.unordered();
        let q = &mut self.qps[at];
        if qp != at || seq == 0 || seq > q.posted || (unordered && q.retired >= q.posted) {
            return Err(err(format!("completion for unknown request {wr_id:#x} on QP {at}")));
        }
        q.retired = if unordered { q.retired + 1 } else { q.retired.max(seq) };
        for p in &mut self.peers {
            if p.credit_wr == Some(wr_id) {
                p.credit_wr = None;
            }
        }
        Ok(())
    }

    /// A write with immediate landed on QP `qp`: re-arm the receive, account for it.
    fn on_imm(&mut self, qp: usize, imm: u32, nic: &mut dyn Nic) -> CommResult<()> {
        let from = qp as u32 / self.cfg.lanes;
        if !self.is_remote(from) {
            return Err(err(format!("immediate {imm:#x} on QP {qp}: rank {from} is not a peer")));
        }
        match Imm::decode(imm) {
            Imm::Slot(seq) if self.cfg.ring().is_some() => {
                self.peers[from as usize].arrivals.slot_landed(from, seq)?;
            }
            Imm::Data(seq) if self.unordered() && self.cfg.staged.is_none() => {
                self.peers[from as usize].arrivals.data_landed(from, seq)?;
                self.stats.data_units_received += 1;
            }
            other => return Err(err(format!("immediate {other:?} from rank {from}: not used in this mode"))),
        }
        nic.post_recv(qp, 1)
    }

    /// Make progress: completions, flags whose data landed, slot pieces and credits.
    pub fn progress(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        self.poll(nic, mem)?;
        for i in 0..self.ranks.len() {
            self.release_flags(self.ranks[i], nic, mem)?;
        }
        if self.cfg.ring().is_some() {
            self.ring_progress(nic, mem)?;
        }
        Ok(())
    }

    /// Whether a posted command may still read its source: a request not retired yet, or a
    /// staged piece not copied out yet (what has completed is known after [`Engine::progress`]).
    pub fn sources_pending(&self) -> bool {
        self.peers.iter().any(|p| !p.outgoing.is_empty()) || self.qps.iter().any(|q| q.posted != q.retired)
    }

    /// For an engine with nothing new to post (the proxy's idle turns): progress, and where a
    /// QP's last request went unsignalled a signalled Nop, as [`Engine::flush`] posts, so that
    /// what may read a source retires without a flush and [`Engine::sources_pending`] gets to
    /// false. Once per such QP: the Nop is then its last request, signalled.
    pub fn progress_idle(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        self.progress(nic, mem)?;
        if self.unordered() {
            return Ok(()); // every request is signalled
        }
        for qp in 0..self.qps.len() {
            let q = &self.qps[qp];
            if q.posted != q.retired && q.last_signaled != q.posted {
                self.post_wr(nic, mem, qp, WrOp::Nop, true)?;
            }
        }
        Ok(())
    }

    /// Complete everything started: every request retired, every flag out, every slot piece
    /// credited back by its receiver.
    pub fn flush(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let start = Instant::now();
        loop {
            self.progress(nic, mem)?;
            let waiting = self.peers.iter().any(|p| !p.outgoing.is_empty() || !p.flags.is_empty());
            if !waiting {
                break;
            }
            self.check_time(start, || "flush: flags or staged pieces still waiting".into())?;
        }
        // Slot senders: wait for the receivers' credits.
        if let (Some(s), Some(st)) = (self.cfg.ring(), &self.staging) {
            let base = st.local.addr;
            for i in 0..self.ranks.len() {
                let r = self.ranks[i];
                while self.peers[r as usize].sent as u32 != self.read_credit(mem, s, base, r) {
                    self.progress(nic, mem)?;
                    self.check_time(start, || format!("flush: rank {r} has not credited every slot piece"))?;
                }
            }
        }
        if !self.unordered() {
            for qp in 0..self.qps.len() {
                if self.qps[qp].posted != self.qps[qp].retired {
                    self.post_wr(nic, mem, qp, WrOp::Nop, true)?;
                }
            }
        }
        while self.qps.iter().any(|q| q.posted != q.retired) {
            self.poll(nic, mem)?;
            self.check_time(start, || "flush: requests not completed".into())?;
        }
        Ok(())
    }

    // ---- the slot ring (staged payloads, flag records) ----

    fn read_credit(&self, mem: &dyn Mem, s: StagedConfig, base: u64, peer: u32) -> u32 {
        let mut b = [0u8; 4];
        mem.read_host(s.credit(base, peer), &mut b);
        u32::from_le_bytes(b)
    }

    fn post_staged(&mut self, c: &FifoCmd, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let s = self.cfg.staged.expect("staged mode");
        let dst = c.dst_rank();
        let bytes = if c.op() == OP_WRITE { c.bytes } else { 0 };
        if bytes > 0 {
            self.resolve_local(c.src, 0, bytes, 0)?;
        }
        let cap = s.slot_bytes as u64 - STAGED_HEADER;
        let mut off = 0;
        loop {
            let n = (bytes - off).min(cap);
            let last = off + n == bytes;
            let h = SlotHeader {
                dst: c.dst,
                skip: off,
                bytes: n,
                flag: if last { c.flag } else { 0 },
                flag_value: c.flag_value as u32,
                ..Default::default()
            };
            let payload = if n > 0 { Some(self.resolve_local(c.src, off, n, 0)?.0) } else { None };
            self.post_piece(dst, h, payload, nic, mem)?;
            off += n;
            if last {
                return Ok(());
            }
        }
    }

    /// Queue one slot piece for `dst`: header written, payload (`h.bytes` from `src`) copied
    /// into the send slot; it goes out from `ring_progress` once the copy is done.
    fn post_piece(
        &mut self,
        dst: u32,
        h: SlotHeader,
        src: Option<u64>,
        nic: &mut dyn Nic,
        mem: &mut dyn Mem,
    ) -> CommResult<()> {
        let s = self.cfg.ring().expect("a slot ring");
        let base = self.staging.as_ref().expect("a staging area").local.addr;
        // A free slot: the receiver credited every piece this slot carried before.
        let start = Instant::now();
        while (self.peers[dst as usize].sent as u32).wrapping_sub(self.read_credit(mem, s, base, dst)) >= s.slots {
            self.progress(nic, mem)?;
            self.check_time(start, || format!("no staging slot free for rank {dst}"))?;
        }
        let seq = self.peers[dst as usize].sent;
        let addr = s.send_slot(base, dst, (seq % s.slots as u64) as u32);
        mem.write_host(addr, bytemuck::bytes_of(&h));
        // The payload's copy; a header-only piece waits for the copies queued before it.
        let token = match src {
            Some(src) => mem.copy(addr + STAGED_HEADER, src, h.bytes)? + 1,
            None => 0,
        };
        let p = &mut self.peers[dst as usize];
        let token = token.max(p.outgoing.back().map_or(0, |x| x.token));
        p.outgoing.push_back(StagedPiece { seq, len: STAGED_HEADER + h.bytes, token });
        p.sent += 1;
        self.stats.staged_pieces += 1;
        self.stats.bytes += h.bytes;
        Ok(())
    }

    /// Process `from`'s landed pieces in sequence order: copy the payload to its GPU buffer,
    /// raise the flag once what it covers has landed.
    fn process_pieces(&mut self, from: u32, mem: &mut dyn Mem) -> CommResult<()> {
        let s = self.cfg.ring().expect("a slot ring");
        let base = self.staging.as_ref().expect("a staging area").local.addr;
        while let Some(slot) = self.peers[from as usize].arrivals.next_ready() {
            let addr = s.recv_slot(base, from, slot);
            let mut hb = [0u8; std::mem::size_of::<SlotHeader>()];
            mem.read_host(addr, &mut hb);
            let h: SlotHeader = bytemuck::pod_read_unaligned(&hb);
            if h.bytes > s.slot_bytes as u64 - STAGED_HEADER || (h.bytes > 0 && self.cfg.staged.is_none()) {
                return Err(err(format!(
                    "slot piece from rank {from}: {} payload bytes in a {}-byte slot",
                    h.bytes, s.slot_bytes
                )));
            }
            if h.flag != 0 && !self.peers[from as usize].arrivals.covered(h.covers) {
                return Ok(()); // its data units are still landing: keep it (and those after it)
            }
            let mut token = None;
            if h.bytes > 0 {
                let (to, _) = self
                    .resolve_local(h.dst, h.skip, h.bytes, 0)
                    .map_err(|e| err(format!("staged piece from rank {from}: {e}")))?;
                token = Some(mem.copy(to, addr + STAGED_HEADER, h.bytes)?);
            }
            if h.flag != 0 {
                let (f, _) =
                    self.resolve_local(h.flag, 0, 4, 0).map_err(|e| err(format!("flag from rank {from}: {e}")))?;
                token = Some(mem.set_u32(f, h.flag_value)?);
                self.stats.flags_raised += 1;
            }
            // Tokens complete in order; a piece with nothing to copy is free once those before are.
            let p = &mut self.peers[from as usize];
            let t = token.map_or_else(|| p.incoming.back().copied().unwrap_or(0), |t| t + 1);
            p.incoming.push_back(t);
            p.arrivals.consume();
            self.stats.staged_received += 1;
        }
        Ok(())
    }

    fn ring_progress(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let s = self.cfg.ring().expect("a slot ring");
        let local = self.staging.as_ref().expect("a staging area").local.clone();
        let (base, lkey) = (local.addr, local.key(0));
        for i in 0..self.ranks.len() {
            self.process_pieces(self.ranks[i], mem)?;
        }
        let done = mem.done()?;
        for i in 0..self.ranks.len() {
            let r = self.ranks[i];
            let remote =
                self.staging.as_ref().and_then(|st| st.remote.get(r as usize)).filter(|x| x.key(0) != 0).cloned();
            let remote = || remote.clone().ok_or_else(|| err(format!("rank {r} has no staging area")));
            // Sender: pieces whose payload reached the send slot go out, in order.
            while let Some(&StagedPiece { seq, len, token }) = self.peers[r as usize].outgoing.front() {
                if token > done {
                    break;
                }
                self.peers[r as usize].outgoing.pop_front();
                let remote = remote()?;
                let slot = (seq % s.slots as u64) as u32;
                let op = WrOp::WriteImm {
                    local: s.send_slot(base, r, slot),
                    lkey,
                    len: len as u32,
                    remote: s.recv_slot(remote.addr, self.me, slot),
                    rkey: remote.key(0),
                    imm: Imm::slot(seq),
                };
                self.post_wr(nic, mem, self.qp(r, 0), op, false)?;
            }
            // Receiver: slots whose memory operations finished are free; tell the sender.
            let unordered = self.unordered();
            let p = &mut self.peers[r as usize];
            while p.incoming.front().is_some_and(|&t| t <= done) {
                p.incoming.pop_front();
                p.freed = p.freed.wrapping_add(1);
            }
            // Unordered: one credit write in flight, so a stale count never lands last.
            if p.freed != p.credited && (p.credit_wr.is_none() || !unordered) {
                let freed = p.freed;
                p.credited = freed;
                let remote = remote()?;
                let op = WrOp::WriteU32 { value: freed, remote: s.credit(remote.addr, self.me), rkey: remote.key(0) };
                let qp = self.qp(r, 0);
                let seq = self.post_wr(nic, mem, qp, op, false)?;
                if unordered {
                    self.peers[r as usize].credit_wr = Some((qp as u64) << 40 | seq);
                }
            }
        }
        Ok(())
    }
}
