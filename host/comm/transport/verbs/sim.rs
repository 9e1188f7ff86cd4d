//! A simulated RDMA fabric for the engine's tests: ranks in threads, memory as byte vectors at
//! fake addresses, several NICs (rails) per rank each with its own completion queue and keys,
//! send queues that refuse to overflow, completions only for signalled requests (and for every
//! failed one), and the NIC reading source memory only when it delivers. Two modes:
//! - RC ([`Delivery::InOrder`]): in order per QP, random order across QPs; a completion retires
//!   everything before it; an immediate with no receive posted is an RNR error.
//! - SRD ([`Delivery::Unordered`]): any order, even within a QP; a completion retires only its
//!   own request (an unsignalled request never frees its send-queue slot, since the application
//!   cannot know it finished); an immediate with no receive posted waits on the wire (RNR retry).
//!
//! A staged "GPU stream" runs copies and flag writes in order, at random later times.
//!
//! Every flag write is checked when it happens: the data of every command it covers must
//! already be in place, and a flag must never go backwards.
use super::engine::{Completion, CompletionKind, Delivery, EngineConfig, Mem, Nic, WorkRequest, WrOp};
use crate::comm::error::{CommError, CommResult};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

pub struct Rng(pub u64);

impl Rng {
    pub fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

struct Region {
    base: u64,
    bytes: Vec<u8>,
    /// Key by rail.
    rkeys: Vec<u32>,
}

struct InFlight {
    from: u32,
    op: WrOp,
    seq: u64,
    signaled: bool,
    wr_id: u64,
}

/// What a flag value promises: (value, destination address, bytes that must be there).
pub type Promise = (u32, u64, Vec<u8>);

pub struct Fabric {
    pub lanes: u32,
    pub sq_depth: u32,
    pub rails: u32,
    pub delivery: Delivery,
    memory: Vec<Vec<Region>>,
    /// By (sender rank, QP index at the sender).
    wire: HashMap<(u32, usize), VecDeque<InFlight>>,
    posted: HashMap<(u32, usize), u64>,
    retired: HashMap<(u32, usize), u64>,
    recvs: HashMap<(u32, usize), u32>,
    /// By rank, then rail.
    cq: Vec<Vec<VecDeque<Completion>>>,
    rng: Rng,
    /// Checks at flag writes: (rank, flag address) -> promises.
    pub promises: HashMap<(u32, u64), Vec<Promise>>,
    last_flag: HashMap<(u32, u64), u32>,
    pub flag_writes: u64,
}

fn sim_err(what: String) -> CommError {
    CommError::Transport { transport: "sim", what }
}

impl Fabric {
    /// A fabric for `ranks` ranks shaped like `cfg` (lanes, send-queue depth, delivery, rails).
    pub fn new(ranks: u32, cfg: &EngineConfig, seed: u64) -> Arc<Mutex<Fabric>> {
        let rails = cfg.rails.len() as u32;
        Arc::new(Mutex::new(Fabric {
            lanes: cfg.lanes,
            sq_depth: cfg.sq_depth,
            rails,
            delivery: cfg.delivery,
            memory: (0..ranks).map(|_| Vec::new()).collect(),
            wire: HashMap::new(),
            posted: HashMap::new(),
            retired: HashMap::new(),
            recvs: HashMap::new(),
            cq: (0..ranks).map(|_| (0..rails).map(|_| VecDeque::new()).collect()).collect(),
            rng: Rng(seed | 1),
            promises: HashMap::new(),
            last_flag: HashMap::new(),
            flag_writes: 0,
        }))
    }

    /// Memory of `rank` at `base`, writable by peers presenting `rkeys[rail]` on that rail.
    pub fn add_region(&mut self, rank: u32, base: u64, bytes: Vec<u8>, rkeys: Vec<u32>) {
        self.memory[rank as usize].push(Region { base, bytes, rkeys });
    }

    /// `rkey`: (key, rail) a remote writer presented; None: local access.
    fn region(&mut self, rank: u32, addr: u64, len: u64, rkey: Option<(u32, u32)>) -> Option<&mut [u8]> {
        let r = self.memory[rank as usize].iter_mut().find(|r| {
            let end = r.base + r.bytes.len() as u64;
            addr >= r.base && addr.checked_add(len).is_some_and(|e| e <= end)
        })?;
        if rkey.is_some_and(|(k, rail)| r.rkeys.get(rail as usize) != Some(&k)) {
            return None;
        }
        let o = (addr - r.base) as usize;
        Some(&mut r.bytes[o..o + len as usize])
    }

    pub fn read(&mut self, rank: u32, addr: u64, len: u64) -> Vec<u8> {
        self.region(rank, addr, len, None)
            .unwrap_or_else(|| panic!("rank {rank}: no memory at {addr:#x}+{len}"))
            .to_vec()
    }

    /// A write by the NIC or the staging stream; flags are checked here.
    pub fn write(&mut self, rank: u32, addr: u64, data: &[u8], rkey: Option<(u32, u32)>) -> bool {
        let Some(dst) = self.region(rank, addr, data.len() as u64, rkey) else { return false };
        dst.copy_from_slice(data);
        if data.len() == 4 {
            if let Some(ps) = self.promises.get(&(rank, addr)) {
                let v = u32::from_le_bytes(data.try_into().unwrap());
                let ps: Vec<Promise> = ps.iter().filter(|p| p.0 <= v).cloned().collect();
                for (pv, at, want) in ps {
                    let have = self.read(rank, at, want.len() as u64);
                    assert!(
                        have == want,
                        "rank {rank}: flag {addr:#x} = {v} but the data of value {pv} at {at:#x} is not there"
                    );
                }
                let last = self.last_flag.insert((rank, addr), v).unwrap_or(0);
                assert!(v >= last, "rank {rank}: flag {addr:#x} went back from {last} to {v}");
                self.flag_writes += 1;
            }
        }
        true
    }

    /// Deliver some requests at the heads of random QPs.
    fn step(&mut self) {
        let mut keys: Vec<(u32, usize)> = self.wire.iter().filter(|(_, q)| !q.is_empty()).map(|(k, _)| *k).collect();
        keys.sort();
        for k in keys {
            if self.rng.below(3) == 0 {
                continue; // this QP is slow right now
            }
            for _ in 0..1 + self.rng.below(4) {
                let Some(q) = self.wire.get_mut(&k).filter(|q| !q.is_empty()) else { break };
                let w = match self.delivery {
                    Delivery::InOrder => q.pop_front(),
                    Delivery::Unordered => {
                        let i = self.rng.below(q.len() as u64) as usize;
                        q.remove(i)
                    }
                };
                let Some(w) = w else { break };
                self.deliver(k, w);
            }
        }
    }

    /// Whether `addr..addr + len` lies inside one region of `rank` (keys aside).
    fn inside(&self, rank: u32, addr: u64, len: u64) -> bool {
        self.memory[rank as usize]
            .iter()
            .any(|r| addr >= r.base && addr.checked_add(len).is_some_and(|e| e <= r.base + r.bytes.len() as u64))
    }

    fn deliver(&mut self, (from_rank, qp): (u32, usize), w: InFlight) {
        let to = qp as u32 / self.lanes;
        // The engine must never aim a write outside the peer's regions (a wrong key is a fault
        // the fabric reports; a wrong range is an engine bug).
        if let WrOp::Write { remote, len, .. } | WrOp::WriteImm { remote, len, .. } = w.op {
            assert!(
                self.inside(to, remote, len as u64),
                "rank {from_rank} wrote {remote:#x}+{len} outside rank {to}'s regions"
            );
        }
        let lane = qp as u32 % self.lanes;
        let peer_qp = (from_rank * self.lanes + lane) as usize;
        let rail = lane % self.rails;
        let ok = match w.op {
            WrOp::Write { local, len, remote, rkey, .. } => {
                let data = self.read(w.from, local, len as u64);
                self.write(to, remote, &data, Some((rkey, rail)))
            }
            WrOp::WriteU32 { value, remote, rkey } => self.write(to, remote, &value.to_le_bytes(), Some((rkey, rail))),
            WrOp::WriteImm { local, len, remote, rkey, imm, .. } => {
                let r = self.recvs.entry((to, peer_qp)).or_default();
                if *r == 0 && self.delivery == Delivery::Unordered {
                    // RNR retry: the write waits on the wire until the receiver posts one.
                    self.wire.entry((from_rank, qp)).or_default().push_back(w);
                    return;
                }
                assert!(*r > 0, "RNR: rank {to} QP {peer_qp} has no receive posted for an immediate");
                *r -= 1;
                let data = self.read(w.from, local, len as u64);
                let ok = self.write(to, remote, &data, Some((rkey, rail)));
                if ok {
                    self.cq[to as usize][rail as usize].push_back(Completion {
                        qp: peer_qp,
                        kind: CompletionKind::RecvImm { imm },
                        error: None,
                    });
                }
                ok
            }
            WrOp::Nop => true,
        };
        if !ok {
            let e = Some("remote access error".to_string());
            self.cq[w.from as usize][rail as usize].push_back(Completion {
                qp,
                kind: CompletionKind::Send { wr_id: w.wr_id },
                error: e,
            });
        } else if w.signaled {
            let retired = match self.delivery {
                Delivery::InOrder => w.seq,
                Delivery::Unordered => self.retired.get(&(w.from, qp)).copied().unwrap_or(0) + 1,
            };
            self.retired.insert((w.from, qp), retired);
            self.cq[w.from as usize][rail as usize].push_back(Completion {
                qp,
                kind: CompletionKind::Send { wr_id: w.wr_id },
                error: None,
            });
        }
    }
}

/// One rank's view of the fabric.
pub struct SimNic {
    pub fabric: Arc<Mutex<Fabric>>,
    pub rank: u32,
}

impl Nic for SimNic {
    fn post_send(&mut self, qp: usize, wr: &WorkRequest) -> CommResult<()> {
        let mut f = self.fabric.lock().unwrap();
        let k = (self.rank, qp);
        let posted = *f.posted.get(&k).unwrap_or(&0);
        let retired = *f.retired.get(&k).unwrap_or(&0);
        if posted - retired >= f.sq_depth as u64 {
            return Err(sim_err(format!(
                "rank {} QP {qp}: send queue overflow ({} requests)",
                self.rank,
                posted - retired
            )));
        }
        if let WrOp::Write { len, .. } | WrOp::WriteImm { len, .. } = wr.op {
            assert!(len > 0, "zero-length data write");
        }
        f.posted.insert(k, posted + 1);
        let w = InFlight { from: self.rank, op: wr.op, seq: posted + 1, signaled: wr.signaled, wr_id: wr.wr_id };
        f.wire.entry(k).or_default().push_back(w);
        Ok(())
    }

    fn post_recv(&mut self, qp: usize, n: u32) -> CommResult<()> {
        *self.fabric.lock().unwrap().recvs.entry((self.rank, qp)).or_default() += n;
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> CommResult<()> {
        let mut f = self.fabric.lock().unwrap();
        f.step();
        // Each NIC's completion queue, starting at a random one.
        let rails = f.rails as usize;
        let first = f.rng.below(rails as u64) as usize;
        for i in 0..rails {
            let n = f.rng.below(8) as usize + 1;
            let q = &mut f.cq[self.rank as usize][(first + i) % rails];
            for _ in 0..n {
                match q.pop_front() {
                    Some(c) => out.push(c),
                    None => break,
                }
            }
        }
        Ok(())
    }
}

enum MemOp {
    Copy { dst: u64, src: u64, len: u64 },
    Set { dst: u64, value: u32 },
}

/// One rank's staging stream.
pub struct SimMem {
    pub fabric: Arc<Mutex<Fabric>>,
    pub rank: u32,
    queue: VecDeque<MemOp>,
    issued: u64,
    done: u64,
    rng: Rng,
}

impl SimMem {
    pub fn new(fabric: Arc<Mutex<Fabric>>, rank: u32) -> Self {
        Self { fabric, rank, queue: VecDeque::new(), issued: 0, done: 0, rng: Rng(0x9e37_79b9 + rank as u64) }
    }
    fn push(&mut self, op: MemOp) -> u64 {
        self.queue.push_back(op);
        self.issued += 1;
        self.issued - 1
    }
}

impl Mem for SimMem {
    fn copy(&mut self, dst: u64, src: u64, len: u64) -> CommResult<u64> {
        Ok(self.push(MemOp::Copy { dst, src, len }))
    }
    fn set_u32(&mut self, dst: u64, value: u32) -> CommResult<u64> {
        Ok(self.push(MemOp::Set { dst, value }))
    }
    fn done(&mut self) -> CommResult<u64> {
        let n = self.rng.below(3);
        let mut f = self.fabric.lock().unwrap();
        for _ in 0..n {
            let Some(op) = self.queue.pop_front() else { break };
            match op {
                MemOp::Copy { dst, src, len } => {
                    let data = f.read(self.rank, src, len);
                    assert!(f.write(self.rank, dst, &data, None), "staging copy to unmapped {dst:#x}");
                }
                MemOp::Set { dst, value } => assert!(f.write(self.rank, dst, &value.to_le_bytes(), None)),
            }
            self.done += 1;
        }
        Ok(self.done)
    }
    fn write_host(&mut self, addr: u64, data: &[u8]) {
        assert!(self.fabric.lock().unwrap().write(self.rank, addr, data, None), "host write outside staging");
    }
    fn read_host(&self, addr: u64, out: &mut [u8]) {
        out.copy_from_slice(&self.fabric.lock().unwrap().read(self.rank, addr, out.len() as u64));
    }
}
