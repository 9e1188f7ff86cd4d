//! The engine on the simulated fabric: RC and SRD delivery, one or several NICs per rank, direct
//! and staged, several seeds; every flag is checked by the fabric at the moment it is raised
//! (all data it covers present, never backwards). Also its fault cases and bounds checks.
use super::engine::*;
use super::sim::{Fabric, Rng, SimMem, SimNic};
use crate::abi::{FifoCmd, OP_FENCE, OP_SIGNAL, OP_WRITE};
use crate::comm::error::{CommError, CommResult};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

// Three registered regions per rank, as a kernel with separate buffers would use.
pub(super) const BUF_INPUT: u64 = 0;
pub(super) const BUF_OUTPUT: u64 = 1;
pub(super) const BUF_FLAGS: u64 = 2;
const STAGING: u64 = 3;

/// Fake address space: rank r's buffer `id` lives at ((r + 1) << 36) + ((id + 1) << 30).
pub(super) fn base(r: u32, id: u64) -> u64 {
    ((r as u64 + 1) << 36) + ((id + 1) << 30)
}

/// Rank r's key for buffer `id` on rail `rail`: distinct everywhere, so a key sent on the wrong
/// NIC is refused.
fn key(r: u32, id: u64, rail: usize) -> u32 {
    1000 * (r + 1) + 10 * id as u32 + rail as u32
}

pub(super) struct World {
    pub ranks: u32,
    /// Input bytes per rank.
    pub n: u64,
    pub fabric: Arc<Mutex<Fabric>>,
}

impl World {
    pub fn new(ranks: u32, n: u64, cfg: &EngineConfig, seed: u64) -> World {
        let fabric = Fabric::new(ranks, cfg, seed);
        let mut rng = Rng(seed ^ 0x5151);
        let rails = cfg.rails.len();
        {
            let mut f = fabric.lock().unwrap();
            let keys = |r, id| (0..rails).map(|k| key(r, id, k)).collect::<Vec<_>>();
            for r in 0..ranks {
                // Inputs encode their source rank in every byte's high bits.
                let input = (0..n).map(|_| (r as u8) << 5 | (rng.below(32) as u8)).collect();
                f.add_region(r, base(r, BUF_INPUT), input, keys(r, BUF_INPUT));
                f.add_region(r, base(r, BUF_OUTPUT), vec![0xee; (ranks as u64 * n) as usize], keys(r, BUF_OUTPUT));
                f.add_region(r, base(r, BUF_FLAGS), vec![0; 4 * ranks as usize], keys(r, BUF_FLAGS));
                if let Some(s) = cfg.ring() {
                    f.add_region(r, base(r, STAGING), vec![0xcd; s.total(ranks) as usize], keys(r, STAGING));
                }
            }
        }
        World { ranks, n, fabric }
    }

    fn region(&self, r: u32, id: u64, rails: usize) -> Region {
        let sizes = [self.n, self.ranks as u64 * self.n, 4 * self.ranks as u64];
        Region { addr: base(r, id), len: sizes[id as usize], keys: (0..rails).map(|k| key(r, id, k)).collect() }
    }

    pub fn engine(&self, cfg: &EngineConfig, me: u32) -> CommResult<Engine> {
        self.engine_with(cfg, me, |_| {})
    }

    /// An engine whose table of peers' regions `tweak` may change first.
    pub fn engine_with(
        &self,
        cfg: &EngineConfig,
        me: u32,
        tweak: impl FnOnce(&mut Vec<Vec<Region>>),
    ) -> CommResult<Engine> {
        let rails = cfg.rails.len();
        let local = (0..3).map(|id| self.region(me, id, rails)).collect();
        let mut remote = (0..self.ranks).map(|q| (0..3).map(|id| self.region(q, id, rails)).collect()).collect();
        tweak(&mut remote);
        let staging = cfg.ring().map(|s| {
            let area = |q| Region {
                addr: base(q, STAGING),
                len: s.total(self.ranks),
                keys: (0..rails).map(|k| key(q, STAGING, k)).collect(),
            };
            Staging { local: area(me), remote: (0..self.ranks).map(area).collect() }
        });
        let remote_ranks = (0..self.ranks).map(|q| q != me).collect();
        Engine::new(cfg.clone(), me, remote_ranks, local, remote, staging)
    }

    pub fn nic(&self, r: u32) -> (SimNic, SimMem) {
        (SimNic { fabric: self.fabric.clone(), rank: r }, SimMem::new(self.fabric.clone(), r))
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
        out
    }

    /// Every rank in its own thread: post its commands in random batches, flush, then keep
    /// serving (receives) until every rank is done. Returns each engine's stats.
    fn run(&self, cfg: &EngineConfig, seed: u64, max_piece: u64) -> Vec<EngineStats> {
        self.run_with(cfg, seed, max_piece, false)
    }

    /// [`World::run`]; with `poison_released`, before its flush each rank waits until the engine
    /// says no command may still read a source, then overwrites its input (as a kernel's next
    /// launch or its caller would): what peers receive must not change.
    fn run_with(&self, cfg: &EngineConfig, seed: u64, max_piece: u64, poison_released: bool) -> Vec<EngineStats> {
        let finished = Arc::new(AtomicU32::new(0));
        let started = Arc::new(std::sync::Barrier::new(self.ranks as usize));
        let mut handles = Vec::new();
        for r in 0..self.ranks {
            let mut rng = Rng(seed.wrapping_mul(31) + r as u64 + 7);
            let cmds = self.commands(r, &mut rng, max_piece);
            let mut engine = self.engine(cfg, r).unwrap();
            let (finished, started, ranks) = (finished.clone(), started.clone(), self.ranks);
            let (fabric, n) = (self.fabric.clone(), self.n);
            let (mut nic, mut mem) = self.nic(r);
            handles.push(std::thread::spawn(move || {
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
                if poison_released {
                    let start = std::time::Instant::now();
                    // As the proxy does while its FIFO is idle.
                    engine.progress_idle(&mut nic, &mut mem).unwrap();
                    while engine.sources_pending() {
                        assert!(start.elapsed() < Duration::from_secs(20), "rank {r}: sources never released");
                        engine.progress_idle(&mut nic, &mut mem).unwrap();
                    }
                    let junk = vec![0xa5; n as usize];
                    assert!(fabric.lock().unwrap().write(r, base(r, BUF_INPUT), &junk, None));
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
                // The last flag from q is its last command's value: every flag was raised.
                let last = f.promises[&(r, base(r, BUF_FLAGS) + 4 * q as u64)].last().unwrap().0;
                let flag = u32::from_le_bytes(f.read(r, base(r, BUF_FLAGS) + 4 * q as u64, 4).try_into().unwrap());
                assert!(flag >= last, "rank {r}: flag of rank {q} is {flag}, its last data command set {last}");
            }
        }
    }
}

pub(super) fn direct(lanes: u32) -> EngineConfig {
    EngineConfig { lanes, sq_depth: 16, signal_every: 5, max_msg: 4096, stripe_min: 8192, ..Default::default() }
}

fn rails(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("mlx5_{i}")).collect()
}

fn srd(lanes: u32, nics: usize) -> EngineConfig {
    EngineConfig {
        delivery: Delivery::Unordered,
        rails: rails(nics),
        records: StagedConfig { slots: 4, slot_bytes: 128 },
        ..direct(lanes)
    }
}

/// Three ranks moving `n` bytes each under `cfg` (pieces of at most `max_piece`), run to the end
/// and every output checked; the world (for its fabric) and each rank's engine counters.
fn checked_run(cfg: &EngineConfig, seed: u64, n: u64, max_piece: u64) -> (World, Vec<EngineStats>) {
    let w = World::new(3, n, cfg, seed);
    let stats = w.run(cfg, seed, max_piece);
    w.check_outputs();
    (w, stats)
}

fn staged(cfg: EngineConfig) -> EngineConfig {
    EngineConfig { staged: Some(StagedConfig { slots: 3, slot_bytes: 1024 }), ..cfg }
}

#[test]
fn direct_one_lane_flags_follow_their_data() {
    for seed in 1..=6 {
        let cfg = direct(1);
        let (w, stats) = checked_run(&cfg, seed, 200_000, 20_000);
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
            checked_run(&cfg, seed, 300_000, 60_000);
        }
    }
}

#[test]
fn rc_several_nics_per_rank_stripe_with_each_nics_keys() {
    for seed in 1..=4 {
        for (lanes, nics) in [(2, 2), (4, 2), (3, 3)] {
            let cfg = EngineConfig { rails: rails(nics), ..direct(lanes) };
            checked_run(&cfg, seed, 300_000, 60_000);
        }
    }
}

#[test]
fn srd_receiver_raises_each_flag_once_its_data_units_landed() {
    for seed in 1..=6 {
        for (lanes, nics) in [(1, 1), (2, 2), (4, 2)] {
            let cfg = srd(lanes, nics);
            let (w, stats) = checked_run(&cfg, seed, 200_000, 40_000);
            let sum = |f: fn(&EngineStats) -> u64| stats.iter().map(f).sum::<u64>();
            assert_eq!(sum(|s| s.data_units_sent), sum(|s| s.data_units_received), "every data unit counted once");
            assert_eq!(sum(|s| s.staged_pieces), sum(|s| s.staged_received), "every flag record processed once");
            assert!(sum(|s| s.flags_raised) > 0 && w.fabric.lock().unwrap().flag_writes > 0);
            for s in &stats {
                assert_eq!(s.signaled, s.send_wrs, "SRD signals every request: {s:?}");
            }
        }
    }
}

#[test]
fn staged_through_host_slots() {
    for seed in 1..=6 {
        let cfg = staged(direct(1));
        let (_, stats) = checked_run(&cfg, seed, 60_000, 5_000);
        let (sent, received): (u64, u64) =
            stats.iter().fold((0, 0), |a, s| (a.0 + s.staged_pieces, a.1 + s.staged_received));
        assert_eq!(sent, received, "every staged piece arrives exactly once");
    }
}

#[test]
fn staged_over_srd_processes_pieces_in_sequence() {
    for seed in 1..=6 {
        let cfg = staged(srd(2, 2));
        let (_, stats) = checked_run(&cfg, seed, 60_000, 5_000);
        let (sent, received): (u64, u64) =
            stats.iter().fold((0, 0), |a, s| (a.0 + s.staged_pieces, a.1 + s.staged_received));
        assert_eq!(sent, received, "every staged piece arrives exactly once");
    }
}

#[test]
fn a_tiny_send_queue_never_overflows() {
    for delivery in [Delivery::InOrder, Delivery::Unordered] {
        let cfg = EngineConfig {
            lanes: 2,
            sq_depth: 3,
            signal_every: 2,
            max_msg: 64,
            stripe_min: 256,
            delivery,
            records: StagedConfig { slots: 2, slot_bytes: 128 },
            ..Default::default()
        };
        let w = World::new(2, 20_000, &cfg, 9);
        w.run(&cfg, 9, 3000);
        w.check_outputs();
    }
}

#[test]
fn sources_released_may_be_rewritten() {
    // Each rank waits for `sources_pending` to go false (no flush), then overwrites its input:
    // every peer must still get the input as it was. Direct and staged, RC and SRD, selective
    // signalling (the last request of a QP unsignalled until the engine asks for a completion).
    let configs = [direct(1), direct(3), staged(direct(2)), srd(2, 2), staged(srd(1, 1))];
    for (i, cfg) in configs.iter().enumerate() {
        let seed = 40 + i as u64;
        let w = World::new(3, 150_000, cfg, seed);
        let inputs: Vec<Vec<u8>> = (0..3).map(|r| w.fabric.lock().unwrap().read(r, base(r, BUF_INPUT), w.n)).collect();
        w.run_with(cfg, seed, 20_000, true);
        let mut f = w.fabric.lock().unwrap();
        for (r, input) in inputs.iter().enumerate() {
            assert_ne!(f.read(r as u32, base(r as u32, BUF_INPUT), w.n), *input, "the input was not overwritten");
            assert!(f.write(r as u32, base(r as u32, BUF_INPUT), input, None));
        }
        drop(f);
        w.check_outputs();
    }
}

fn write(dst: u32, off: u64, dst_off: u64, bytes: u64) -> FifoCmd {
    FifoCmd {
        header: FifoCmd::header_word(OP_WRITE, 0, dst, 0),
        src: FifoCmd::loc(BUF_INPUT, off),
        dst: FifoCmd::loc(BUF_OUTPUT, dst_off),
        bytes,
        ..Default::default()
    }
}

#[test]
fn bad_commands_and_configs_are_named() {
    let cfg = direct(2);
    let w = World::new(2, 1000, &cfg, 3);
    let mut e = w.engine(&cfg, 0).unwrap();
    let (mut nic, mut mem) = w.nic(0);
    let e1 = e.post(&[write(1, 900, 0, 200)], &mut nic, &mut mem).unwrap_err().to_string();
    assert!(e1.contains("local buffer 0: bytes 900+200 outside its 1000"), "{e1}");
    let e2 = e.post(&[write(0, 0, 0, 8)], &mut nic, &mut mem).unwrap_err().to_string();
    assert!(e2.contains("rank 0") && e2.contains("no QP"), "{e2}");
    let e3 = e.post(&[write(1, 0, 1500, 800)], &mut nic, &mut mem).unwrap_err().to_string();
    assert!(e3.contains("rank 1 buffer 1: bytes 1500+800 outside its 2000"), "{e3}");
    let bad = EngineConfig { signal_every: 16, sq_depth: 16, ..Default::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("signal_every"));
    let bad = EngineConfig { lanes: 0, ..Default::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("lanes"));
    let bad = EngineConfig { lanes: 1, rails: rails(2), ..Default::default() };
    assert!(bad.validate().unwrap_err().to_string().contains("`rails`: 2 NICs for 1 lanes"));
    let bad = EngineConfig {
        delivery: Delivery::Unordered,
        records: StagedConfig { slots: 0, slot_bytes: 128 },
        ..Default::default()
    };
    assert!(bad.validate().unwrap_err().to_string().contains("`records`"));
}

/// Offsets and lengths whose sum overflows u64, or lands exactly on / one past a region's
/// end: a typed OutOfBounds naming the region, nothing posted, in debug and release alike
/// (the sum is computed with checked_add).
#[test]
fn offset_plus_length_overflow_is_a_typed_error_in_every_mode() {
    let cases = [
        // (src off, dst off, bytes, region named)
        (0, 0, u64::MAX, "local buffer 0"),
        (1, 0, u64::MAX, "local buffer 0"),
        (u64::MAX >> 16, 0, 2, "local buffer 0"), // the largest offset a FIFO location holds
        (999, 0, 2, "local buffer 0"),
        (0, 1999, 2, "rank 1 buffer 1"),
        (0, (1 << 48) - 1, 1000, "rank 1 buffer 1"),
    ];
    for cfg in [direct(2), srd(2, 2), staged(direct(1)), staged(srd(1, 1))] {
        let w = World::new(2, 1000, &cfg, 3);
        let mut e = w.engine(&cfg, 0).unwrap();
        let (mut nic, mut mem) = w.nic(0);
        e.start(&mut nic, &mut mem).unwrap();
        for &(src, dst, bytes, region) in &cases {
            if cfg.staged.is_some() && region.starts_with("rank") {
                continue; // staged: the receiver resolves the destination (checked below)
            }
            let before = e.stats;
            match e.post(&[write(1, src, dst, bytes)], &mut nic, &mut mem) {
                Err(CommError::OutOfBounds { region: r, off, len, .. }) => {
                    assert_eq!(r, region, "{cfg:?}: {src}/{dst}+{bytes}");
                    assert_eq!(len, bytes);
                    assert!(off == src || off == dst);
                }
                other => panic!("{cfg:?}: {src}/{dst}+{bytes}: want OutOfBounds, got {other:?}"),
            }
            assert_eq!(e.stats.send_wrs, before.send_wrs, "nothing posted for a bad command");
        }
        // In range, up to the last byte: fine.
        e.post(&[write(1, 0, 1000, 1000)], &mut nic, &mut mem).unwrap();
    }
    // The staged receiver checks the destination of a piece with the same rule.
    let cfg = staged(direct(1));
    let w = World::new(2, 1000, &cfg, 3);
    let mut sender = w.engine(&cfg, 0).unwrap();
    let mut receiver = w.engine(&cfg, 1).unwrap();
    let ((mut n0, mut m0), (mut n1, mut m1)) = (w.nic(0), w.nic(1));
    receiver.start(&mut n1, &mut m1).unwrap();
    sender.start(&mut n0, &mut m0).unwrap();
    sender.post(&[write(1, 0, (1 << 48) - 1, 10)], &mut n0, &mut m0).unwrap();
    let start = std::time::Instant::now();
    let e = loop {
        sender.progress(&mut n0, &mut m0).unwrap();
        if let Err(e) = receiver.progress(&mut n1, &mut m1) {
            break e.to_string();
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the receiver never saw the bad piece");
    };
    assert!(e.contains("staged piece from rank 0") && e.contains("local buffer 1: bytes"), "{e}");
}

#[test]
fn a_failed_completion_names_the_rank_and_nic() {
    for cfg in [direct(2), srd(2, 2)] {
        let cfg = EngineConfig { rails: rails(2), stripe_min: 64, ..cfg };
        let w = World::new(2, 1000, &cfg, 4);
        // Rank 0 holds a wrong key for rank 1's output buffer on rail 1: lane 1's write fails.
        let mut e = w.engine_with(&cfg, 0, |remote| remote[1][BUF_OUTPUT as usize].keys[1] = 7).unwrap();
        let (mut nic, mut mem) = w.nic(0);
        let (mut pn, mut pm) = w.nic(1);
        w.engine(&cfg, 1).unwrap().start(&mut pn, &mut pm).unwrap();
        e.start(&mut nic, &mut mem).unwrap();
        e.post(&[write(1, 0, 0, 1000)], &mut nic, &mut mem).unwrap();
        let msg = e.flush(&mut nic, &mut mem).unwrap_err().to_string();
        assert!(msg.contains("rank 1 lane 1 (NIC mlx5_1)") && msg.contains("remote access error"), "{cfg:?}: {msg}");
    }
}

#[test]
fn a_stalled_peer_times_out_with_a_report() {
    // The receiver never runs: the sender runs out of slots (staged, SRD flag records) or of
    // send-queue space (SRD data waiting on the wire for receives) and says who waited for what.
    let timeout = Duration::from_millis(200);
    let cases: [(EngineConfig, &str); 3] = [
        (staged(direct(1)), "no staging slot free for rank 1"),
        (staged(srd(1, 1)), "no staging slot free for rank 1"),
        (srd(1, 1), "send queue of QP 1 full"),
    ];
    for (cfg, want) in cases {
        let cfg = EngineConfig { timeout, sq_depth: 4, signal_every: 2, ..cfg };
        let w = World::new(2, 4000, &cfg, 5);
        let mut e = w.engine(&cfg, 0).unwrap();
        let mut peer = w.engine(&cfg, 1).unwrap();
        let (mut nic, mut mem) = w.nic(0);
        let (mut pn, mut pm) = w.nic(1);
        peer.start(&mut pn, &mut pm).unwrap();
        e.start(&mut nic, &mut mem).unwrap();
        // Flags only where the ring is what runs out; SRD data alone must fill the send queue.
        let flag = if want.contains("slot") { FifoCmd::loc(BUF_FLAGS, 0) } else { 0 };
        let cmds: Vec<FifoCmd> =
            (0..16).map(|i| FifoCmd { flag, flag_value: i + 1, ..write(1, 250 * i, 250 * i, 250) }).collect();
        let msg = e.post(&cmds, &mut nic, &mut mem).and_then(|_| e.flush(&mut nic, &mut mem)).unwrap_err().to_string();
        assert!(msg.contains(want) && msg.contains("rank 0:") && msg.contains("rank 1"), "{cfg:?}: {msg}");
    }
}
