//! The RDMA protocol of the verbs transport, apart from the verbs calls themselves: which work
//! requests a FIFO command becomes, on which queue pair, which of them are signalled, when a
//! flag may be written, and the host-staged path. It drives a [`Nic`] (real: `ibv_post_send`,
//! `ibv_post_recv`, `ibv_poll_cq`) and a [`Mem`] (real: CUDA copies on a stream), so every rule
//! here runs in the unit tests against a simulated NIC that reorders across queue pairs.
//!
//! Direct mode (GPU memory registered with the NIC):
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
//! Staged mode (NICs that cannot register GPU memory; all ranks agree on it): every rank owns a
//! pinned host staging area with, per peer, a send ring and a receive ring of `slots` slots of
//! `slot_bytes` (a 64-byte header, then payload) and a credit word. The sender copies a piece
//! GPU -> its send slot, then RDMA-writes the slot to the same slot of the peer's receive ring
//! *with immediate* (the slot index), on lane 0. The receiver's proxy sees the immediate, copies
//! the payload to its GPU buffer (resolved with its own buffer table) and then raises the flag
//! on the same CUDA stream, and when both are done returns a credit (an inline write of its
//! freed-slot count into the sender's credit word). A slot is reused only after its credit.
use crate::abi::{FifoCmd, OP_FENCE, OP_SIGNAL, OP_WRITE};
use crate::comm::error::{CommError, CommResult};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub(crate) fn err(what: impl Into<String>) -> CommError {
    CommError::Transport { transport: "verbs", what: what.into() }
}

/// A local registered region: (address, length, lkey).
pub type LocalRegion = (u64, u64, u32);

/// A registered buffer a peer may write, as exchanged through the bootstrap.
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
        /// The value written (a flag value).
        value: u32,
        /// Destination address in the peer's memory.
        remote: u64,
        /// Key of the destination's registration.
        rkey: u32,
    },
    /// RDMA WRITE WITH IMMEDIATE: the peer consumes a posted receive and learns `imm`.
    WriteImm {
        /// Source address (a send slot of the local staging area).
        local: u64,
        /// Key of the source's registration.
        lkey: u32,
        /// Bytes to write (slot header and payload).
        len: u32,
        /// Destination address (the same slot of the peer's receive ring).
        remote: u64,
        /// Key of the destination's registration.
        rkey: u32,
        /// The immediate the peer receives: the slot index.
        imm: u32,
    },
    /// A zero-length RDMA WRITE, always signalled: retires everything before it on the QP.
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
    /// A signalled send request (and every request before it on its QP) finished.
    Send {
        /// The `wr_id` of the signalled request.
        wr_id: u64,
    },
    /// A WRITE WITH IMMEDIATE from the peer landed; a posted receive was consumed.
    RecvImm {
        /// The immediate the sender attached (a staged slot index).
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

/// Memory operations of the staged path. Asynchronous ones return a token; they complete in
/// token order (one CUDA stream), and `done()` is the number completed so far.
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

/// Tuning of the engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// QPs per peer.
    pub lanes: u32,
    /// Send-queue depth of every QP.
    pub sq_depth: u32,
    /// Signal every n-th request of a QP.
    pub signal_every: u32,
    /// Largest single RDMA message.
    pub max_msg: u64,
    /// Data of at least this many bytes is split over all lanes.
    pub stripe_min: u64,
    /// Bound on every wait for the NIC (send queue space, completions, credits).
    pub timeout: Duration,
    /// Host-staged mode.
    pub staged: Option<StagedConfig>,
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
        if let Some(s) = &self.staged {
            if s.slots == 0 || s.slot_bytes < 2 * STAGED_HEADER as u32 || s.slot_bytes % 64 != 0 {
                return bad("staged", format!("{s:?}: need slots >= 1 and slot_bytes a multiple of 64, >= 128"));
            }
        }
        Ok(())
    }
}

/// Host-staged mode: ring geometry per peer and direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StagedConfig {
    /// Slots per ring (the most pieces in flight to one peer before a credit returns).
    pub slots: u32,
    /// Bytes per slot: the [`STAGED_HEADER`], then payload. A multiple of 64, at least 128.
    pub slot_bytes: u32,
}

/// Bytes of a staged slot's header.
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

/// The header of a staged slot (its first bytes).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, bytemuck::Pod, bytemuck::Zeroable)]
struct SlotHeader {
    /// Destination location (FIFO buffer id and offset, resolved by the receiver).
    dst: u64,
    bytes: u64,
    /// Flag location (0: none) and value.
    flag: u64,
    flag_value: u32,
    _pad: u32,
}

/// The staging area of this rank and where the peers' areas are.
#[derive(Clone, Debug)]
pub struct Staging {
    /// This rank's area, registered with the NIC.
    pub local: LocalRegion,
    /// Every rank's area by rank (an `rkey` of 0: that rank has none).
    pub remote: Vec<RemoteRegion>,
}

#[derive(Default)]
struct QpState {
    /// Requests posted / retired (a retired request finished; sequence numbers start at 1).
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
    slot: u32,
    len: u64,
    token: u64,
}

#[derive(Default)]
struct Peer {
    flags: VecDeque<PendingFlag>,
    // Staged sender: slots ever used, pieces waiting for their GPU -> host copy.
    sent: u32,
    outgoing: VecDeque<StagedPiece>,
    // Staged receiver: slots whose copies are enqueued (token), slots freed and credited.
    incoming: VecDeque<u64>,
    freed: u32,
    credited: u32,
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
    /// Staged pieces sent (one slot each).
    pub staged_pieces: u64,
    /// Staged pieces received from peers.
    pub staged_received: u64,
}

/// The protocol state of one rank (see the module docs).
pub struct Engine {
    cfg: EngineConfig,
    /// This rank (its block in every peer's staging area).
    me: u32,
    /// Which ranks have QPs (other nodes), as flags by rank and as a list.
    remote_ranks: Vec<bool>,
    ranks: Vec<u32>,
    local: Vec<LocalRegion>,
    remote: Vec<Vec<RemoteRegion>>,
    staging: Option<Staging>,
    qps: Vec<QpState>,
    peers: Vec<Peer>,
    completions: Vec<Completion>,
    /// Counters since [`Engine::new`].
    pub stats: EngineStats,
}

impl Engine {
    /// `remote_ranks[r]`: rank r is reached through QPs. `local`/`remote`: registered buffers by
    /// FIFO buffer id (direct mode; in staged mode only `local` is used, by the receiver).
    pub fn new(
        cfg: EngineConfig,
        me: u32,
        remote_ranks: Vec<bool>,
        local: Vec<LocalRegion>,
        remote: Vec<Vec<RemoteRegion>>,
        staging: Option<Staging>,
    ) -> CommResult<Self> {
        cfg.validate()?;
        if cfg.staged.is_some() != staging.is_some() {
            return Err(err("staged mode needs a staging area (and only staged mode has one)"));
        }
        let world = remote_ranks.len();
        let qps = (0..world * cfg.lanes as usize).map(|_| QpState::default()).collect();
        let peers = (0..world).map(|_| Peer::default()).collect();
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

    /// Arm the receive side (staged mode: one receive per slot on every peer's lane 0,
    /// and zeroed credit words). Call before the peers may send (the closing barrier).
    pub fn start(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        if let (Some(s), Some(st)) = (self.cfg.staged, &self.staging) {
            for &r in &self.ranks {
                mem.write_host(s.credit(st.local.0, r), &[0; 4]);
                nic.post_recv(self.qp(r, 0), s.slots)?;
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

    fn resolve_remote(&self, dst: u32, loc: u64, len: u64) -> CommResult<(u64, u32)> {
        let (id, off) = FifoCmd::split(loc);
        let regions = self.remote.get(dst as usize).ok_or_else(|| err(format!("no regions known for rank {dst}")))?;
        let r = regions.get(id as usize).ok_or_else(|| err(format!("rank {dst} registered no buffer {id}")))?;
        if r.rkey == 0 || off + len > r.len {
            return Err(err(format!("rank {dst} buffer {id}: bytes {off}..{} outside its {}", off + len, r.len)));
        }
        Ok((r.addr + off, r.rkey))
    }

    fn resolve_local(&self, loc: u64, len: u64) -> CommResult<(u64, u32)> {
        let (id, off) = FifoCmd::split(loc);
        let &(base, blen, lkey) =
            self.local.get(id as usize).ok_or_else(|| err(format!("local buffer {id} not registered")))?;
        if off + len > blen {
            return Err(err(format!("local buffer {id}: bytes {off}..{} outside its {blen}", off + len)));
        }
        Ok((base + off, lkey))
    }

    fn post_direct(&mut self, c: &FifoCmd, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let dst = c.dst_rank();
        if c.op() == OP_WRITE && c.bytes > 0 {
            let (src, lkey) = self.resolve_local(c.src, c.bytes)?;
            let (to, rkey) = self.resolve_remote(dst, c.dst, c.bytes)?;
            let lanes = if c.bytes >= self.cfg.stripe_min { self.cfg.lanes as u64 } else { 1 };
            // Lane j takes one contiguous share (64-byte multiples), sent in max_msg messages.
            let share = c.bytes.div_ceil(lanes).div_ceil(64) * 64;
            for lane in 0..lanes {
                let (start, end) = ((lane * share).min(c.bytes), ((lane + 1) * share).min(c.bytes));
                let mut off = start;
                while off < end {
                    let n = (end - off).min(self.cfg.max_msg);
                    let last = off + n == end;
                    let op = WrOp::Write { local: src + off, lkey, len: n as u32, remote: to + off, rkey };
                    // A flagged command's last message on a non-zero lane is signalled: its
                    // flag will wait for that completion.
                    let signal = last && lane > 0 && c.flag != 0;
                    self.post_wr(nic, mem, self.qp(dst, lane as u32), op, signal)?;
                    self.stats.bytes += n;
                    off += n;
                }
            }
        }
        if c.flag != 0 {
            let (remote, rkey) = self.resolve_remote(dst, c.flag, 4)?;
            let mut need = Vec::new();
            for lane in 1..self.cfg.lanes {
                let qp = self.qp(dst, lane);
                let q = &self.qps[qp];
                if q.posted > q.retired {
                    let seq = if q.last_signaled == q.posted {
                        q.posted
                    } else {
                        self.post_wr(nic, mem, qp, WrOp::Nop, true)?
                    };
                    need.push((lane, seq));
                }
            }
            let op = WrOp::WriteU32 { value: c.flag_value as u32, remote, rkey };
            self.peers[dst as usize].flags.push_back(PendingFlag { op, need });
            self.release_flags(dst, nic, mem)?;
        }
        Ok(())
    }

    /// Post the peer's queued flags whose data is known to be placed, in order.
    fn release_flags(&mut self, dst: u32, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        loop {
            let ready = match self.peers[dst as usize].flags.front() {
                Some(f) => f.need.iter().all(|&(lane, seq)| self.qps[self.qp(dst, lane)].retired >= seq),
                None => return Ok(()),
            };
            if !ready {
                return Ok(());
            }
            let f = self.peers[dst as usize].flags.pop_front().unwrap();
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
        let q = &mut self.qps[qp];
        let seq = q.posted + 1;
        // Signal on schedule (signal_every < sq_depth, so a full queue always holds a signalled
        // request whose completion frees it), on request, and for a Nop.
        let signaled = force || matches!(op, WrOp::Nop) || q.since_signal + 1 >= self.cfg.signal_every;
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
            return Err(err(format!("{} after {:?}; {}", what(), self.cfg.timeout, self.describe())));
        }
        Ok(())
    }

    /// Where every QP and peer stands, for timeout reports.
    pub fn describe(&self) -> String {
        let mut s = String::new();
        for &r in &self.ranks {
            for lane in 0..self.cfg.lanes {
                let q = &self.qps[self.qp(r, lane)];
                if q.posted != q.retired {
                    s += &format!("rank {r} lane {lane}: posted {} retired {}; ", q.posted, q.retired);
                }
            }
            let p = &self.peers[r as usize];
            if !p.flags.is_empty() || p.sent != 0 || p.freed != 0 {
                s += &format!(
                    "rank {r}: {} flags waiting, staged slots sent {} (waiting {}), received-and-freed {} (credited {}); ",
                    p.flags.len(),
                    p.sent,
                    p.outgoing.len(),
                    p.freed,
                    p.credited
                );
            }
        }
        if s.is_empty() {
            "nothing outstanding".into()
        } else {
            s
        }
    }

    fn poll(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let mut comps = std::mem::take(&mut self.completions);
        comps.clear();
        nic.poll(&mut comps)?;
        for c in &comps {
            let (rank, lane) = (c.qp as u32 / self.cfg.lanes, c.qp as u32 % self.cfg.lanes);
            if let Some(e) = &c.error {
                return Err(err(format!("work completion failed on QP {} (rank {rank} lane {lane}): {e}", c.qp)));
            }
            match c.kind {
                CompletionKind::Send { wr_id } => {
                    let (qp, seq) = ((wr_id >> 40) as usize, wr_id & ((1 << 40) - 1));
                    if qp != c.qp || seq > self.qps[qp].posted {
                        return Err(err(format!("completion for unknown request {wr_id:#x} on QP {}", c.qp)));
                    }
                    let q = &mut self.qps[qp];
                    q.retired = q.retired.max(seq);
                }
                CompletionKind::RecvImm { imm } => self.receive_staged(rank, imm, nic, mem)?,
            }
        }
        self.completions = comps;
        Ok(())
    }

    /// Make progress: completions, flags whose data landed, staged pieces and credits.
    pub fn progress(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        self.poll(nic, mem)?;
        for i in 0..self.ranks.len() {
            self.release_flags(self.ranks[i], nic, mem)?;
        }
        if self.cfg.staged.is_some() {
            self.staged_progress(nic, mem)?;
        }
        Ok(())
    }

    /// Complete everything started: every request retired, every flag out, every staged slot
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
        // Staged senders: wait for the receivers' credits.
        if let (Some(s), Some(st)) = (self.cfg.staged, &self.staging) {
            let base = st.local.0;
            for i in 0..self.ranks.len() {
                let r = self.ranks[i];
                while self.peers[r as usize].sent != self.read_credit(mem, s, base, r) {
                    self.progress(nic, mem)?;
                    self.check_time(start, || format!("flush: rank {r} has not credited every staged slot"))?;
                }
            }
        }
        for qp in 0..self.qps.len() {
            if self.qps[qp].posted != self.qps[qp].retired {
                self.post_wr(nic, mem, qp, WrOp::Nop, true)?;
            }
        }
        while self.qps.iter().any(|q| q.posted != q.retired) {
            self.poll(nic, mem)?;
            self.check_time(start, || "flush: requests not completed".into())?;
        }
        Ok(())
    }

    // ---- staged mode ----

    fn read_credit(&self, mem: &dyn Mem, s: StagedConfig, base: u64, peer: u32) -> u32 {
        let mut b = [0u8; 4];
        mem.read_host(s.credit(base, peer), &mut b);
        u32::from_le_bytes(b)
    }

    fn post_staged(&mut self, c: &FifoCmd, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let s = self.cfg.staged.unwrap();
        let base = self.staging.as_ref().unwrap().local.0;
        let dst = c.dst_rank();
        let bytes = if c.op() == OP_WRITE { c.bytes } else { 0 };
        let (src, _) = if bytes > 0 { self.resolve_local(c.src, bytes)? } else { (0, 0) };
        let cap = s.slot_bytes as u64 - STAGED_HEADER;
        let mut off = 0;
        loop {
            let n = (bytes - off).min(cap);
            let last = off + n == bytes;
            // A free slot: the receiver credited every slot this one was used for before.
            let start = Instant::now();
            while self.peers[dst as usize].sent.wrapping_sub(self.read_credit(mem, s, base, dst)) >= s.slots {
                self.progress(nic, mem)?;
                self.check_time(start, || format!("no staging slot free for rank {dst}"))?;
            }
            let slot = self.peers[dst as usize].sent % s.slots;
            let addr = s.send_slot(base, dst, slot);
            let h = SlotHeader {
                dst: c.dst + off,
                bytes: n,
                flag: if last { c.flag } else { 0 },
                flag_value: c.flag_value as u32,
                _pad: 0,
            };
            mem.write_host(addr, bytemuck::bytes_of(&h));
            // The payload's copy; a header-only piece waits for the copies queued before it.
            let token = if n > 0 { mem.copy(addr + STAGED_HEADER, src + off, n)? + 1 } else { 0 };
            let p = &mut self.peers[dst as usize];
            let token = token.max(p.outgoing.back().map_or(0, |x| x.token));
            p.outgoing.push_back(StagedPiece { slot, len: STAGED_HEADER + n, token });
            p.sent = p.sent.wrapping_add(1);
            self.stats.staged_pieces += 1;
            self.stats.bytes += n;
            off += n;
            if last {
                return Ok(());
            }
        }
    }

    fn receive_staged(&mut self, from: u32, slot: u32, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let s = self.cfg.staged.ok_or_else(|| err(format!("an immediate from rank {from} outside staged mode")))?;
        if slot >= s.slots || !self.is_remote(from) {
            return Err(err(format!("immediate {slot} from rank {from}: no such staging slot")));
        }
        let base = self.staging.as_ref().unwrap().local.0;
        let addr = s.recv_slot(base, from, slot);
        let mut hb = [0u8; std::mem::size_of::<SlotHeader>()];
        mem.read_host(addr, &mut hb);
        let h: SlotHeader = bytemuck::pod_read_unaligned(&hb);
        if h.bytes > s.slot_bytes as u64 - STAGED_HEADER {
            return Err(err(format!(
                "staged piece from rank {from}: {} bytes in a {}-byte slot",
                h.bytes, s.slot_bytes
            )));
        }
        let mut token = None;
        if h.bytes > 0 {
            let (to, _) =
                self.resolve_local(h.dst, h.bytes).map_err(|e| err(format!("staged piece from rank {from}: {e}")))?;
            token = Some(mem.copy(to, addr + STAGED_HEADER, h.bytes)?);
        }
        if h.flag != 0 {
            let (f, _) =
                self.resolve_local(h.flag, 4).map_err(|e| err(format!("staged flag from rank {from}: {e}")))?;
            token = Some(mem.set_u32(f, h.flag_value)?);
        }
        // Tokens complete in order; a piece with nothing to copy is free once those before are.
        let p = &mut self.peers[from as usize];
        let t = token.map_or_else(|| p.incoming.back().copied().unwrap_or(0), |t| t + 1);
        p.incoming.push_back(t);
        self.stats.staged_received += 1;
        nic.post_recv(self.qp(from, 0), 1)
    }

    fn staged_progress(&mut self, nic: &mut dyn Nic, mem: &mut dyn Mem) -> CommResult<()> {
        let s = self.cfg.staged.unwrap();
        let (base, _, lkey) = self.staging.as_ref().unwrap().local;
        let done = mem.done()?;
        for i in 0..self.ranks.len() {
            let r = self.ranks[i];
            let remote = self.staging.as_ref().unwrap().remote.get(r as usize).copied().filter(|x| x.rkey != 0);
            let remote = || remote.ok_or_else(|| err(format!("rank {r} has no staging area")));
            // Sender: pieces whose payload reached the send slot go out, in order.
            while let Some(&StagedPiece { slot, len, token }) = self.peers[r as usize].outgoing.front() {
                if token > done {
                    break;
                }
                self.peers[r as usize].outgoing.pop_front();
                let remote = remote()?;
                let op = WrOp::WriteImm {
                    local: s.send_slot(base, r, slot),
                    lkey,
                    len: len as u32,
                    remote: s.recv_slot(remote.addr, self.me, slot),
                    rkey: remote.rkey,
                    imm: slot,
                };
                self.post_wr(nic, mem, self.qp(r, 0), op, false)?;
            }
            // Receiver: slots whose copies finished are free; tell the sender.
            let p = &mut self.peers[r as usize];
            while p.incoming.front().is_some_and(|&t| t <= done) {
                p.incoming.pop_front();
                p.freed = p.freed.wrapping_add(1);
            }
            if p.freed != p.credited {
                let freed = p.freed;
                p.credited = freed;
                let remote = remote()?;
                let op = WrOp::WriteU32 { value: freed, remote: s.credit(remote.addr, self.me), rkey: remote.rkey };
                self.post_wr(nic, mem, self.qp(r, 0), op, false)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::super::sim::{Fabric, Rng, SimMem, SimNic};
    use super::*;
    // Three registered regions per rank, as a kernel with separate buffers would use.
    const BUF_INPUT: u64 = 0;
    const BUF_OUTPUT: u64 = 1;
    const BUF_FLAGS: u64 = 2;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::{Arc, Mutex};

    /// Fake address space: rank r's buffer `id` lives at ((r + 1) << 36) + ((id + 1) << 30).
    fn base(r: u32, id: u64) -> u64 {
        ((r as u64 + 1) << 36) + ((id + 1) << 30)
    }
    const STAGING: u64 = 3;

    struct World {
        ranks: u32,
        /// Input bytes per rank.
        n: u64,
        fabric: Arc<Mutex<Fabric>>,
    }

    impl World {
        fn new(ranks: u32, n: u64, cfg: &EngineConfig, seed: u64) -> World {
            let fabric = Fabric::new(ranks, cfg.lanes, cfg.sq_depth, seed);
            let mut rng = Rng(seed ^ 0x5151);
            {
                let mut f = fabric.lock().unwrap();
                for r in 0..ranks {
                    // Inputs encode their source rank in every byte's high bits.
                    let input = (0..n).map(|_| (r as u8) << 5 | (rng.below(32) as u8)).collect();
                    f.add_region(r, base(r, BUF_INPUT), input, 10 * r + 1);
                    f.add_region(r, base(r, BUF_OUTPUT), vec![0xee; (ranks as u64 * n) as usize], 10 * r + 2);
                    f.add_region(r, base(r, BUF_FLAGS), vec![0; 4 * ranks as usize], 10 * r + 3);
                    if let Some(s) = cfg.staged {
                        f.add_region(r, base(r, STAGING), vec![0xcd; s.total(ranks) as usize], 10 * r + 4);
                    }
                }
            }
            World { ranks, n, fabric }
        }

        fn engine(&self, cfg: &EngineConfig, me: u32) -> CommResult<Engine> {
            let sizes = [self.n, self.ranks as u64 * self.n, 4 * self.ranks as u64];
            let local = (0..3).map(|id| (base(me, id), sizes[id as usize], 10 * me + 1 + id as u32)).collect();
            let remote = (0..self.ranks)
                .map(|q| {
                    (0..3u64)
                        .map(|id| RemoteRegion {
                            addr: base(q, id),
                            len: sizes[id as usize],
                            rkey: 10 * q + 1 + id as u32,
                            _pad: 0,
                        })
                        .collect()
                })
                .collect();
            let staging = cfg.staged.map(|s| Staging {
                local: (base(me, STAGING), s.total(self.ranks), 10 * me + 4),
                remote: (0..self.ranks)
                    .map(|q| RemoteRegion {
                        addr: base(q, STAGING),
                        len: s.total(self.ranks),
                        rkey: 10 * q + 4,
                        _pad: 0,
                    })
                    .collect(),
            });
            let remote_ranks = (0..self.ranks).map(|q| q != me).collect();
            Engine::new(cfg.clone(), me, remote_ranks, local, remote, staging)
        }

        /// Rank `r`'s commands: its whole input to every other rank in random pieces; some
        /// carry the flag (value = command number + 1, one flag word per source rank, so the
        /// flag must only grow), some are SIGNALs, a few are FENCEs. Promises are registered.
        fn commands(&self, r: u32, rng: &mut Rng, max_piece: u64) -> Vec<FifoCmd> {
            let mut out = Vec::new();
            let mut f = self.fabric.lock().unwrap();
            for q in (0..self.ranks).filter(|&q| q != r) {
                let flag_addr = base(q, BUF_FLAGS) + 4 * r as u64;
                let mut off = 0;
                let mut j = 0u32;
                while off < self.n {
                    let n = (1 + rng.below(max_piece)).min(self.n - off);
                    let last = off + n == self.n;
                    let flagged = last || rng.below(3) == 0;
                    j += 1;
                    out.push(FifoCmd {
                        header: FifoCmd::header_word(OP_WRITE, 0, q, 0),
                        src: FifoCmd::loc(BUF_INPUT, off),
                        dst: FifoCmd::loc(BUF_OUTPUT, r as u64 * self.n + off),
                        bytes: n,
                        flag: if flagged { FifoCmd::loc(BUF_FLAGS, 4 * r as u64) } else { 0 },
                        flag_value: j as u64,
                        ..Default::default()
                    });
                    let want = f.read(r, base(r, BUF_INPUT) + off, n);
                    f.promises.entry((q, flag_addr)).or_default().push((
                        j,
                        base(q, BUF_OUTPUT) + r as u64 * self.n + off,
                        want,
                    ));
                    if rng.below(8) == 0 {
                        j += 1;
                        out.push(FifoCmd {
                            header: FifoCmd::header_word(OP_SIGNAL, 0, q, 0),
                            flag: FifoCmd::loc(BUF_FLAGS, 4 * r as u64),
                            flag_value: j as u64,
                            ..Default::default()
                        });
                    }
                    if rng.below(40) == 0 {
                        out.push(FifoCmd { header: FifoCmd::header_word(OP_FENCE, 0, q, 0), ..Default::default() });
                    }
                    off += n;
                }
            }
            // Interleave destinations a little, keeping each destination's order.
            out
        }

        /// Every rank in its own thread: post its commands in random batches, flush, then keep
        /// serving (staged receives) until every rank is done. Returns each engine's stats.
        fn run(&self, cfg: &EngineConfig, seed: u64, max_piece: u64) -> Vec<EngineStats> {
            let finished = Arc::new(AtomicU32::new(0));
            let started = Arc::new(std::sync::Barrier::new(self.ranks as usize));
            let mut handles = Vec::new();
            for r in 0..self.ranks {
                let mut rng = Rng(seed.wrapping_mul(31) + r as u64 + 7);
                let cmds = self.commands(r, &mut rng, max_piece);
                let mut engine = self.engine(cfg, r).unwrap();
                let (fabric, finished, started, ranks) =
                    (self.fabric.clone(), finished.clone(), started.clone(), self.ranks);
                handles.push(std::thread::spawn(move || {
                    let mut nic = SimNic { fabric: fabric.clone(), rank: r };
                    let mut mem = SimMem::new(fabric, r);
                    engine.start(&mut nic, &mut mem).unwrap();
                    started.wait(); // connect()'s closing barrier: receives are posted
                    let mut i = 0;
                    while i < cmds.len() {
                        let k = (1 + rng.below(16) as usize).min(cmds.len() - i);
                        engine.post(&cmds[i..i + k], &mut nic, &mut mem).unwrap_or_else(|e| panic!("rank {r}: {e}"));
                        i += k;
                        if rng.below(4) == 0 {
                            engine.progress(&mut nic, &mut mem).unwrap();
                        }
                    }
                    engine.flush(&mut nic, &mut mem).unwrap_or_else(|e| panic!("rank {r}: flush: {e}"));
                    finished.fetch_add(1, Ordering::SeqCst);
                    while finished.load(Ordering::SeqCst) < ranks {
                        engine.progress(&mut nic, &mut mem).unwrap();
                    }
                    // Drain what peers sent last (their flush waited for our credits, so only
                    // the stream's tail can be left).
                    for _ in 0..1000 {
                        engine.progress(&mut nic, &mut mem).unwrap();
                    }
                    engine.stats
                }));
            }
            handles.into_iter().map(|h| h.join().unwrap()).collect()
        }

        fn check_outputs(&self) {
            let mut f = self.fabric.lock().unwrap();
            for r in 0..self.ranks {
                for q in (0..self.ranks).filter(|&q| q != r) {
                    let want = f.read(q, base(q, BUF_INPUT), self.n);
                    let have = f.read(r, base(r, BUF_OUTPUT) + q as u64 * self.n, self.n);
                    assert!(have == want, "rank {r}: rank {q}'s data incomplete");
                }
            }
        }
    }

    fn direct(lanes: u32) -> EngineConfig {
        EngineConfig { lanes, sq_depth: 16, signal_every: 5, max_msg: 4096, stripe_min: 8192, ..Default::default() }
    }

    #[test]
    fn direct_one_lane_flags_follow_their_data() {
        for seed in 1..=6 {
            let cfg = direct(1);
            let w = World::new(3, 200_000, &cfg, seed);
            let stats = w.run(&cfg, seed, 20_000);
            w.check_outputs();
            assert!(w.fabric.lock().unwrap().flag_writes > 0);
            for s in stats {
                assert!(s.signaled * 3 <= s.send_wrs, "selective signalling: {s:?}");
            }
        }
    }

    #[test]
    fn direct_several_lanes_stripe_and_order_flags() {
        for seed in 1..=6 {
            for lanes in [2, 4] {
                let cfg = direct(lanes);
                let w = World::new(3, 300_000, &cfg, seed);
                w.run(&cfg, seed, 60_000);
                w.check_outputs();
            }
        }
    }

    #[test]
    fn staged_through_host_slots() {
        for seed in 1..=6 {
            let cfg = EngineConfig { staged: Some(StagedConfig { slots: 3, slot_bytes: 1024 }), ..direct(1) };
            let w = World::new(3, 60_000, &cfg, seed);
            let stats = w.run(&cfg, seed, 5_000);
            w.check_outputs();
            let (sent, received): (u64, u64) =
                stats.iter().fold((0, 0), |a, s| (a.0 + s.staged_pieces, a.1 + s.staged_received));
            assert_eq!(sent, received, "every staged piece arrives exactly once");
        }
    }

    #[test]
    fn a_tiny_send_queue_never_overflows() {
        let cfg =
            EngineConfig { lanes: 2, sq_depth: 3, signal_every: 2, max_msg: 64, stripe_min: 256, ..Default::default() };
        let w = World::new(2, 20_000, &cfg, 9);
        w.run(&cfg, 9, 3000);
        w.check_outputs();
    }

    #[test]
    fn bad_commands_and_configs_are_named() {
        let cfg = direct(2);
        let w = World::new(2, 1000, &cfg, 3);
        let mut e = w.engine(&cfg, 0).unwrap();
        let mut nic = SimNic { fabric: w.fabric.clone(), rank: 0 };
        let mut mem = SimMem::new(w.fabric.clone(), 0);
        let cmd = |dst: u32, off: u64, dst_off: u64, bytes: u64| FifoCmd {
            header: FifoCmd::header_word(OP_WRITE, 0, dst, 0),
            src: FifoCmd::loc(BUF_INPUT, off),
            dst: FifoCmd::loc(BUF_OUTPUT, dst_off),
            bytes,
            ..Default::default()
        };
        let e1 = e.post(&[cmd(1, 900, 0, 200)], &mut nic, &mut mem).unwrap_err().to_string();
        assert!(e1.contains("local buffer 0: bytes 900..1100"), "{e1}");
        let e2 = e.post(&[cmd(0, 0, 0, 8)], &mut nic, &mut mem).unwrap_err().to_string();
        assert!(e2.contains("rank 0") && e2.contains("no QP"), "{e2}");
        let e3 = e.post(&[cmd(1, 0, 1500, 800)], &mut nic, &mut mem).unwrap_err().to_string();
        assert!(e3.contains("rank 1 buffer 1: bytes 1500..2300"), "{e3}");
        let bad = EngineConfig { signal_every: 16, sq_depth: 16, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("signal_every"));
        let bad = EngineConfig { lanes: 0, ..Default::default() };
        assert!(bad.validate().unwrap_err().to_string().contains("lanes"));
    }

    #[test]
    fn a_failed_completion_names_the_peer() {
        let cfg = direct(1);
        let w = World::new(2, 1000, &cfg, 4);
        let mut e = w.engine(&cfg, 0).unwrap();
        e.remote[1][BUF_OUTPUT as usize].rkey = 999; // the peer will refuse this key
        let mut nic = SimNic { fabric: w.fabric.clone(), rank: 0 };
        let mut mem = SimMem::new(w.fabric.clone(), 0);
        let cmd = FifoCmd {
            header: FifoCmd::header_word(OP_WRITE, 0, 1, 0),
            src: FifoCmd::loc(BUF_INPUT, 0),
            dst: FifoCmd::loc(BUF_OUTPUT, 0),
            bytes: 100,
            ..Default::default()
        };
        e.post(&[cmd], &mut nic, &mut mem).unwrap();
        let msg = e.flush(&mut nic, &mut mem).unwrap_err().to_string();
        assert!(msg.contains("rank 1 lane 0") && msg.contains("remote access error"), "{msg}");
    }

    #[test]
    fn a_stalled_peer_times_out_with_a_report() {
        // Staged, and the receiver never runs: the sender runs out of slots and says so.
        let cfg = EngineConfig {
            staged: Some(StagedConfig { slots: 2, slot_bytes: 256 }),
            timeout: std::time::Duration::from_millis(200),
            ..direct(1)
        };
        let w = World::new(2, 4000, &cfg, 5);
        let mut e = w.engine(&cfg, 0).unwrap();
        let mut peer = w.engine(&cfg, 1).unwrap();
        let mut nic = SimNic { fabric: w.fabric.clone(), rank: 0 };
        peer.start(&mut SimNic { fabric: w.fabric.clone(), rank: 1 }, &mut SimMem::new(w.fabric.clone(), 1)).unwrap();
        let mut mem = SimMem::new(w.fabric.clone(), 0);
        e.start(&mut nic, &mut mem).unwrap();
        let cmd = FifoCmd {
            header: FifoCmd::header_word(OP_WRITE, 0, 1, 0),
            src: FifoCmd::loc(BUF_INPUT, 0),
            dst: FifoCmd::loc(BUF_OUTPUT, 0),
            bytes: 4000,
            ..Default::default()
        };
        let msg = e.post(&[cmd], &mut nic, &mut mem).unwrap_err().to_string();
        assert!(msg.contains("no staging slot free for rank 1") && msg.contains("staged slots sent 2"), "{msg}");
    }
}
