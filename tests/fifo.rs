//! The FIFO protocol with CPU producers (wrap-around, back-pressure, no torn reads, exactly once
//! and in order per producer), the proxy with a mock transport (batching, counters, draining
//! shutdown, errors reaching the caller), the emulated NIC's timing model, and the fault matrix
//! of both (timeouts leave no hole, bad commands rejected, leftovers and panics reported, bounds
//! that cannot overflow).
use mkernel::abi::{FifoCmd, OP_WRITE};

// Buffer ids round-trip through a command whatever they are.
const BUF_INPUT: u64 = 0;
const BUF_OUTPUT: u64 = 1;
const BUF_FLAGS: u64 = 2;
use mkernel::comm::fifo::{claim, publish, Consumer, HostRing, RingMemory};
use mkernel::comm::proxy::{Proxy, ProxyConfig};
use mkernel::comm::transport::{FnTransport, NicModel, Regions};
use mkernel::comm::CommError;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

fn cmd(producer: u32, i: u64) -> FifoCmd {
    let id = ((producer as u64) << 32) | i;
    FifoCmd {
        header: FifoCmd::header_word(OP_WRITE, 0, producer, 0),
        src: FifoCmd::loc(BUF_INPUT, id),
        dst: FifoCmd::loc(BUF_OUTPUT, id ^ 0xabcdef),
        bytes: id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52,
        flag: FifoCmd::loc(BUF_FLAGS, i),
        flag_value: !id,
        pushed_ns: id,
        _reserved: 0,
    }
}

/// Every field must belong to the same command (a torn read mixes two).
fn untorn(c: &FifoCmd) -> (u32, u64) {
    let id = c.pushed_ns;
    let (p, i) = ((id >> 32) as u32, id & 0xffff_ffff);
    assert_eq!(c.op(), OP_WRITE);
    assert_eq!(c.dst_rank(), p);
    assert_eq!(FifoCmd::split(c.src), (BUF_INPUT, id));
    assert_eq!(FifoCmd::split(c.dst), (BUF_OUTPUT, id ^ 0xabcdef));
    assert_eq!(c.bytes, id.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 52);
    assert_eq!(c.flag_value, !id, "torn command {id:#x}");
    (p, i)
}

#[test]
fn wraps_around_in_order() {
    let ring = HostRing::new(8).unwrap();
    let mut consumer = Consumer::default();
    let mut out = Vec::new();
    for i in 0..1000u64 {
        ring.push(cmd(0, i), Duration::from_secs(1)).unwrap();
        if i % 3 == 2 {
            consumer.poll(&ring, &mut out, 2);
        }
        if i % 7 == 6 {
            consumer.poll(&ring, &mut out, 64);
        }
    }
    consumer.poll(&ring, &mut out, usize::MAX);
    assert_eq!(out.len(), 1000);
    for (n, c) in out.iter().enumerate() {
        assert_eq!(untorn(c), (0, n as u64));
        assert_eq!(c.ticket(), n as u32);
    }
    assert_eq!(ring.tail().load(Ordering::Relaxed), 1000);
}

#[test]
fn bad_capacity_is_rejected() {
    assert!(matches!(HostRing::new(12), Err(CommError::InvalidArgument { arg: "capacity", .. })));
    assert!(matches!(HostRing::new(1), Err(CommError::InvalidArgument { arg: "capacity", .. })));
}

#[test]
fn back_pressure_blocks_and_times_out() {
    let ring = HostRing::new(4).unwrap();
    for i in 0..4 {
        ring.push(cmd(0, i), Duration::from_millis(10)).unwrap();
    }
    let start = Instant::now();
    let err = ring.push(cmd(0, 4), Duration::from_millis(50)).unwrap_err();
    assert!(start.elapsed() >= Duration::from_millis(50));
    assert!(err.to_string().contains("free slot"), "{err}");
}

#[test]
fn many_producers_through_a_proxy() {
    let (producers, per) = (6u32, 20_000u64);
    let ring = Arc::new(HostRing::new(64).unwrap());
    let next: Arc<Vec<AtomicU64>> = Arc::new((0..producers).map(|_| AtomicU64::new(0)).collect());
    let max_in_flight = Arc::new(AtomicU64::new(0));
    let (n2, r2, m2) = (next.clone(), ring.clone(), max_in_flight.clone());
    let proxy = Proxy::start(
        ring.clone(),
        Box::new(FnTransport(move |c: &FifoCmd| {
            let (p, i) = untorn(c);
            let expected = n2[p as usize].fetch_add(1, Ordering::Relaxed);
            assert_eq!(i, expected, "producer {p}: command {i} arrived when {expected} was due");
            // Back-pressure: producers never get more than `capacity` ahead of the consumer.
            let ahead = r2.as_ref().tail().load(Ordering::Relaxed);
            m2.fetch_max(u64::from(c.ticket()).saturating_sub(ahead), Ordering::Relaxed);
            Ok(())
        })),
        ProxyConfig { max_batch: 16, ..Default::default() },
    )
    .unwrap();
    let threads: Vec<_> = (0..producers)
        .map(|p| {
            let ring = ring.clone();
            std::thread::spawn(move || {
                for i in 0..per {
                    ring.push(cmd(p, i), Duration::from_secs(20)).unwrap();
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let stats = proxy.shutdown().unwrap();
    assert_eq!(stats.commands, producers as u64 * per);
    assert!(next.iter().all(|n| n.load(Ordering::Relaxed) == per));
    assert!(stats.max_batch <= 16 && stats.batches >= stats.commands / 16);
    assert!(max_in_flight.load(Ordering::Relaxed) <= 64);
}

#[test]
fn transport_errors_reach_the_caller() {
    let ring = Arc::new(HostRing::new(16).unwrap());
    let proxy = Proxy::start(
        ring.clone(),
        Box::new(FnTransport(|c: &FifoCmd| {
            if c.pushed_ns == 3 {
                return Err(CommError::Transport { transport: "mock", what: "link down".into() });
            }
            Ok(())
        })),
        ProxyConfig::default(),
    )
    .unwrap();
    for i in 0..5 {
        ring.push(cmd(0, i), Duration::from_secs(1)).unwrap();
    }
    let start = Instant::now();
    while proxy.check().is_ok() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(1));
    }
    let e = proxy.check().unwrap_err();
    assert!(e.to_string().contains("link down"), "{e}");
    assert!(proxy.shutdown().unwrap_err().to_string().contains("link down"));
}

/// A transport whose flush blocks until `release` says so (at most `cap`): a stuck NIC.
struct StuckFlush {
    release: std::sync::mpsc::Receiver<()>,
    cap: Duration,
}

impl mkernel::comm::transport::Transport for StuckFlush {
    fn name(&self) -> &'static str {
        "stuck-flush"
    }
    fn post(&mut self, _cmds: &[FifoCmd]) -> Result<(), CommError> {
        Ok(())
    }
    fn flush(&mut self) -> Result<(), CommError> {
        let _ = self.release.recv_timeout(self.cap);
        Ok(())
    }
    fn unreleased(&mut self) -> Result<u64, CommError> {
        Ok(0)
    }
}

#[test]
fn shutdown_is_bounded_while_commands_keep_arriving() {
    // A producer that never stops (a kernel still pushing): shutdown reports it after its bound
    // instead of draining forever.
    let ring = Arc::new(HostRing::new(64).unwrap());
    let cfg = ProxyConfig {
        drain_timeout: Duration::from_millis(20),
        shutdown_timeout: Duration::from_millis(300),
        ..Default::default()
    };
    let proxy = Proxy::start(ring.clone(), Box::new(FnTransport(|_: &FifoCmd| Ok(()))), cfg).unwrap();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let (r2, s2) = (ring.clone(), stop.clone());
    let producer = std::thread::spawn(move || {
        let mut i = 0;
        while !s2.load(Ordering::Relaxed) {
            let _ = r2.push(cmd(0, i), Duration::from_millis(100));
            i += 1;
        }
    });
    std::thread::sleep(Duration::from_millis(20));
    let t0 = Instant::now();
    let e = proxy.shutdown().unwrap_err().to_string();
    let took = t0.elapsed();
    stop.store(true, Ordering::Relaxed);
    producer.join().unwrap();
    assert!(e.contains("still arriving"), "{e}");
    assert!(took < Duration::from_secs(2), "shutdown took {took:?}");
}

#[test]
fn shutdown_is_bounded_when_the_flush_never_returns() {
    // The transport's flush hangs: shutdown returns after its bound, naming it, and leaves the
    // thread (which still holds the transport) behind; dropping a proxy is bounded the same way.
    for drop_it in [false, true] {
        let (release, rx) = std::sync::mpsc::channel();
        let cfg = ProxyConfig {
            drain_timeout: Duration::from_millis(10),
            shutdown_timeout: Duration::from_millis(200),
            ..Default::default()
        };
        let stuck = StuckFlush { release: rx, cap: Duration::from_secs(20) };
        let proxy = Proxy::start(Arc::new(HostRing::new(8).unwrap()), Box::new(stuck), cfg).unwrap();
        let t0 = Instant::now();
        if drop_it {
            drop(proxy);
        } else {
            let e = proxy.shutdown().unwrap_err().to_string();
            assert!(e.contains("did not end within"), "{e}");
        }
        let took = t0.elapsed();
        let _ = release.send(());
        assert!(took < Duration::from_secs(3), "shutdown took {took:?}");
    }
}

/// A transport that counts its flushes and the commands posted before each.
struct CountingFlush {
    posted: u64,
    flushed_after: Arc<Mutex<Vec<u64>>>,
}

impl mkernel::comm::transport::Transport for CountingFlush {
    fn name(&self) -> &'static str {
        "counting-flush"
    }
    fn post(&mut self, cmds: &[FifoCmd]) -> Result<(), CommError> {
        self.posted += cmds.len() as u64;
        Ok(())
    }
    fn flush(&mut self) -> Result<(), CommError> {
        self.flushed_after.lock().unwrap().push(self.posted);
        Ok(())
    }
    fn unreleased(&mut self) -> Result<u64, CommError> {
        Ok(0)
    }
}

#[test]
fn a_flush_completes_what_was_pushed_before_it() {
    // `Proxy::flush` (what the communicator does before reusing a dropped op's heap memory):
    // it returns once the transport was flushed after every command pushed before the call;
    // bounded when the flush never returns.
    let ring = Arc::new(HostRing::new(64).unwrap());
    let flushed_after = Arc::new(Mutex::new(Vec::new()));
    let t = CountingFlush { posted: 0, flushed_after: flushed_after.clone() };
    let proxy = Proxy::start(ring.clone(), Box::new(t), ProxyConfig::default()).unwrap();
    for round in 1..=3u64 {
        for i in 0..50 {
            ring.push(cmd(0, i), Duration::from_secs(1)).unwrap();
        }
        proxy.flush(Duration::from_secs(5)).unwrap();
        let seen = flushed_after.lock().unwrap().last().copied();
        assert_eq!(seen, Some(50 * round), "round {round}: flushed before every command was posted");
    }
    proxy.shutdown().unwrap();
    let (release, rx) = std::sync::mpsc::channel();
    let stuck = StuckFlush { release: rx, cap: Duration::from_secs(20) };
    let cfg = ProxyConfig { shutdown_timeout: Duration::from_millis(300), ..Default::default() };
    let proxy = Proxy::start(Arc::new(HostRing::new(8).unwrap()), Box::new(stuck), cfg).unwrap();
    let t0 = Instant::now();
    let e = proxy.flush(Duration::from_millis(100)).unwrap_err().to_string();
    assert!(e.contains("not done within"), "{e}");
    assert!(t0.elapsed() < Duration::from_secs(2));
    let _ = release.send(());
}

#[test]
fn shutdown_timeout_below_the_drain_is_rejected() {
    let cfg = ProxyConfig { shutdown_timeout: Duration::from_millis(1), ..Default::default() };
    let ring = Arc::new(HostRing::new(8).unwrap());
    match Proxy::start(ring, Box::new(FnTransport(|_: &FifoCmd| Ok(()))), cfg) {
        Err(CommError::InvalidArgument { arg, .. }) => assert_eq!(arg, "shutdown_timeout"),
        Err(e) => panic!("expected InvalidArgument, got {e}"),
        Ok(_) => panic!("a shutdown bound below the drain was accepted"),
    }
}

#[test]
fn shutdown_drains_queued_commands() {
    let ring = Arc::new(HostRing::new(256).unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = got.clone();
    let proxy = Proxy::start(
        ring.clone(),
        Box::new(FnTransport(move |c: &FifoCmd| {
            g2.lock().unwrap().push(c.pushed_ns);
            Ok(())
        })),
        ProxyConfig::default(),
    )
    .unwrap();
    for i in 0..200 {
        ring.push(cmd(0, i), Duration::from_secs(1)).unwrap();
    }
    proxy.shutdown().unwrap();
    assert_eq!(*got.lock().unwrap(), (0..200).collect::<Vec<u64>>());
}

#[test]
fn nic_model_serialises_and_adds_latency() {
    let mut nic = NicModel::new(50e9, Duration::from_micros(2));
    let t0 = Instant::now();
    let a = nic.deliver(t0, 50_000_000); // 1 ms on a 50 GB/s wire
    let b = nic.deliver(t0, 50_000_000); // queued behind it
    let us = |t: Instant| t.duration_since(t0).as_secs_f64() * 1e6;
    assert!((us(a) - 1002.0).abs() < 1.0, "{}", us(a));
    assert!((us(b) - 2002.0).abs() < 1.0, "{}", us(b));
    let later = t0 + Duration::from_millis(10);
    let c = nic.deliver(later, 4); // idle wire: latency dominates
    assert!((c.duration_since(later).as_secs_f64() * 1e6 - 2.0).abs() < 0.1);
}

// ---- Fault matrix: FIFO and proxy -------------------------------------------------------------

/// Wait (bounded) until `cond` holds.
fn eventually(what: &str, cond: impl Fn() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(start.elapsed() < Duration::from_secs(5), "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(1));
    }
}

#[test]
fn capacity_zero_and_huge_are_typed_errors() {
    for cap in [0, 1, 3, 12, 1 << 31, u64::MAX] {
        match HostRing::new(cap) {
            Err(CommError::InvalidArgument { arg: "capacity", rule }) => assert!(rule.contains(&cap.to_string())),
            other => panic!("capacity {cap}: {:?}", other.map(|r| r.capacity())),
        }
    }
    // The largest legal ring: allocated lazily (no pages touched) or refused with a typed error,
    // never an abort.
    match HostRing::new(1 << 30) {
        Ok(r) => assert_eq!(r.capacity(), 1 << 30),
        Err(CommError::InvalidArgument { arg: "capacity", rule }) => assert!(rule.contains("refused"), "{rule}"),
        Err(e) => panic!("{e}"),
    }
}

#[test]
fn a_timed_out_push_claims_nothing_and_leaves_no_hole() {
    let ring = HostRing::new(4).unwrap();
    let mut consumer = Consumer::default();
    for i in 0..4 {
        assert_eq!(ring.push(cmd(0, i), Duration::from_millis(10)).unwrap(), i);
    }
    let err = ring.push(cmd(0, 99), Duration::from_millis(20)).unwrap_err();
    assert!(err.to_string().contains("nothing was claimed"), "{err}");
    assert_eq!(ring.claimed(), Some(4), "the timed-out push claimed a ticket");
    let mut out = Vec::new();
    assert_eq!(consumer.poll(&ring, &mut out, 64), 4);
    // Later pushes take the next tickets and are all delivered: no hole at ticket 4.
    for i in 4..10 {
        assert_eq!(ring.push(cmd(0, i), Duration::from_millis(100)).unwrap(), i);
        assert_eq!(consumer.poll(&ring, &mut out, 64), 1, "command {i} was not delivered");
    }
    assert_eq!(out.iter().map(|c| untorn(c).1).collect::<Vec<_>>(), (0..10).collect::<Vec<u64>>());
}

#[test]
fn pushes_that_time_out_against_a_stalled_proxy_lose_nothing_else() {
    // The transport stalls on its first command; producers with a short timeout fail some pushes
    // meanwhile. Every push that returned Ok must arrive, in order, and shutdown must be clean.
    let ring = Arc::new(HostRing::new(8).unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = got.clone();
    let proxy = Proxy::start(
        ring.clone(),
        Box::new(FnTransport(move |c: &FifoCmd| {
            let mut g = g2.lock().unwrap();
            if g.is_empty() {
                std::thread::sleep(Duration::from_millis(300));
            }
            g.push(c.pushed_ns);
            Ok(())
        })),
        ProxyConfig::default(),
    )
    .unwrap();
    let (mut ok, mut timed_out) = (Vec::new(), 0);
    for i in 0..40 {
        match ring.push(cmd(0, i), Duration::from_millis(20)) {
            Ok(_) => ok.push(i),
            Err(_) => timed_out += 1,
        }
    }
    assert!(timed_out > 0, "the stall never filled the ring");
    let stats = proxy.shutdown().unwrap();
    assert_eq!(*got.lock().unwrap(), ok);
    assert_eq!(stats.commands, ok.len() as u64);
}

#[test]
fn bad_commands_never_enter_the_ring() {
    let ring = HostRing::new(4).unwrap();
    let with_op = |op| FifoCmd { header: FifoCmd::header_word(op, 0, 0, 0), ..cmd(0, 0) };
    let overflow = FifoCmd { src: FifoCmd::loc(0, 16), bytes: u64::MAX, ..cmd(0, 0) };
    let end = FifoCmd { src: FifoCmd::loc(0, (1 << 48) - 8), dst: 0, bytes: 9, ..cmd(0, 0) };
    for (bad, rule) in [
        (with_op(0), "op 0 is not a command"),
        (with_op(4), "op 4 is not a command"),
        (with_op(0xff), "op 255"),
        (overflow, "src range 16 +"),
        (end, "past the 2^48 offset space"),
    ] {
        match ring.push(bad, Duration::from_millis(10)) {
            Err(CommError::InvalidArgument { arg: "cmd", rule: r }) => assert!(r.contains(rule), "{r}"),
            other => panic!("expected a rejected command ({rule}), got {other:?}"),
        }
    }
    assert_eq!(ring.claimed(), Some(0));
    let fine = FifoCmd { src: FifoCmd::loc(0, (1 << 48) - 8), dst: 0, bytes: 8, ..cmd(0, 0) };
    ring.push(fine, Duration::from_millis(10)).unwrap();
}

#[test]
fn a_bad_command_in_the_ring_stops_the_proxy_with_its_ticket() {
    // A GPU producer does not run the host's check: the proxy decodes what it takes.
    let ring = Arc::new(HostRing::new(8).unwrap());
    let got = Arc::new(Mutex::new(Vec::new()));
    let g2 = got.clone();
    let transport = FnTransport(move |c: &FifoCmd| {
        g2.lock().unwrap().push(c.pushed_ns);
        Ok(())
    });
    let proxy = Proxy::start(ring.clone(), Box::new(transport), ProxyConfig::default()).unwrap();
    ring.push(cmd(0, 0), Duration::from_secs(1)).unwrap();
    let t = claim(&*ring, &head_of(&ring), Duration::from_secs(1)).unwrap();
    publish(&*ring, t, FifoCmd { header: FifoCmd::header_word(0, 0, 1, 0), ..cmd(0, 1) });
    eventually("the proxy to reject op 0", || proxy.check().is_err());
    let e = proxy.check().unwrap_err().to_string();
    assert!(e.contains("ticket 1: op 0 is not a command"), "{e}");
    assert_eq!(*got.lock().unwrap(), [0], "the command before the bad one was not delivered");
    assert!(proxy.shutdown().unwrap_err().to_string().contains("op 0"));
}

/// The ring's producer head, for driving `claim` / `publish` by hand like a GPU would.
fn head_of(ring: &HostRing) -> AtomicU64 {
    AtomicU64::new(ring.claimed().unwrap())
}

#[test]
fn max_batch_zero_is_rejected() {
    let ring = Arc::new(HostRing::new(4).unwrap());
    match Proxy::start(
        ring,
        Box::new(FnTransport(|_: &FifoCmd| Ok(()))),
        ProxyConfig { max_batch: 0, ..Default::default() },
    ) {
        Err(CommError::InvalidArgument { arg: "max_batch", rule }) => assert!(rule.contains("at least 1"), "{rule}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("max_batch 0 accepted"),
    }
}

#[test]
fn shutdown_reports_commands_left_in_the_ring() {
    // A producer that died between claiming ticket 1 and writing it: ticket 2 is published behind
    // the hole and can never be delivered. Shutdown must say so instead of returning Ok.
    let ring = Arc::new(HostRing::new(8).unwrap());
    let proxy =
        Proxy::start(ring.clone(), Box::new(FnTransport(|_: &FifoCmd| Ok(()))), ProxyConfig::default()).unwrap();
    ring.push(cmd(0, 0), Duration::from_secs(1)).unwrap();
    let head = head_of(&ring);
    let dead = claim(&*ring, &head, Duration::from_secs(1)).unwrap();
    let behind = claim(&*ring, &head, Duration::from_secs(1)).unwrap();
    publish(&*ring, behind, cmd(0, 2));
    assert_eq!((dead, behind), (1, 2));
    eventually("the proxy to take ticket 0", || proxy.stats().commands == 1);
    let e = proxy.shutdown().unwrap_err().to_string();
    assert!(e.contains("1 command(s) left in the ring (tickets 2)") && e.contains("expected ticket 1"), "{e}");
}

#[test]
fn shutdown_counts_claimed_but_unwritten_tickets() {
    let ring = Arc::new(HostRing::new(8).unwrap());
    let proxy =
        Proxy::start(ring.clone(), Box::new(FnTransport(|_: &FifoCmd| Ok(()))), ProxyConfig::default()).unwrap();
    ring.push(cmd(0, 0), Duration::from_secs(1)).unwrap();
    // Claim through the ring's own head (as a producer that then died would).
    let t = claim_on_ring(&ring);
    assert_eq!(t, 1);
    let e = proxy.shutdown().unwrap_err().to_string();
    assert!(e.contains("1 claimed but never written"), "{e}");
}

/// Claim the next ticket of `ring` itself through a push that is undone: push a command, then
/// clear its header as if it was never written.
fn claim_on_ring(ring: &HostRing) -> u64 {
    let t = ring.push(cmd(0, 1), Duration::from_secs(1)).unwrap();
    let slot = (t % ring.capacity()) as usize * 8;
    ring.words()[slot].store(0, Ordering::SeqCst);
    t
}

#[test]
fn a_panicking_proxy_thread_is_an_error_from_check() {
    let ring = Arc::new(HostRing::new(4).unwrap());
    let proxy = Proxy::start(
        ring.clone(),
        Box::new(FnTransport(|_: &FifoCmd| -> Result<(), CommError> { panic!("transport bug") })),
        ProxyConfig::default(),
    )
    .unwrap();
    proxy.check().unwrap();
    ring.push(cmd(0, 0), Duration::from_secs(1)).unwrap();
    eventually("the panic to surface", || proxy.check().is_err());
    let e = proxy.check().unwrap_err().to_string();
    assert!(e.contains("proxy thread panicked: transport bug"), "{e}");
    assert!(proxy.shutdown().unwrap_err().to_string().contains("panicked"));
}

// ---- Fault matrix: emulated NIC bounds ---------------------------------------------------------

#[test]
fn emulated_nic_bounds_never_overflow() {
    let regions = Regions { local: vec![(0x1000, 4096)], remote: vec![vec![(0x9000, 4096)], vec![(0, 64)]] };
    let at = |off| FifoCmd::loc(0, off);
    assert_eq!(regions.resolve(at(0), None, 4096).unwrap(), 0x1000);
    assert_eq!(regions.resolve(at(4095), Some(0), 1).unwrap(), 0x9000 + 4095);
    assert_eq!(regions.resolve(at(4096), None, 0).unwrap(), 0x1000 + 4096);
    for (off, bytes) in [(0, 4097), (4096, 1), (1, u64::MAX), ((1 << 48) - 1, u64::MAX), (4095, u64::MAX - 4094)] {
        let e = regions.resolve(at(off), None, bytes).unwrap_err().to_string();
        assert!(e.contains("run past its 4096 bytes"), "{off} + {bytes}: {e}");
    }
    assert!(regions.resolve(at(0), Some(1), 4).unwrap_err().to_string().contains("not mapped"));
    assert!(regions.resolve(at(0), Some(2), 4).unwrap_err().to_string().contains("no buffers registered for rank 2"));
    assert!(regions.resolve(FifoCmd::loc(3, 0), None, 4).unwrap_err().to_string().contains("id 3 not registered"));
}

/// A transport whose latest `unreleased` commands still read their sources, as the test says.
struct Reading(Arc<AtomicU64>);

impl mkernel::comm::transport::Transport for Reading {
    fn name(&self) -> &'static str {
        "reading"
    }
    fn post(&mut self, _: &[FifoCmd]) -> Result<(), CommError> {
        Ok(())
    }
    fn flush(&mut self) -> Result<(), CommError> {
        Ok(())
    }
    fn unreleased(&mut self) -> Result<u64, CommError> {
        Ok(self.0.load(Ordering::Acquire))
    }
}

#[test]
fn the_released_position_trails_what_the_transport_still_reads() {
    let ring = Arc::new(HostRing::new(8).unwrap());
    let reading = Arc::new(AtomicU64::new(3));
    let proxy = Proxy::start(ring.clone(), Box::new(Reading(reading.clone())), ProxyConfig::default()).unwrap();
    for i in 0..5 {
        ring.push(cmd(0, i), Duration::from_secs(1)).unwrap();
    }
    eventually("all five taken", || ring.tail().load(Ordering::Acquire) == 5);
    eventually("the two oldest released", || ring.released().load(Ordering::Acquire) == 2);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ring.released().load(Ordering::Acquire), 2, "released ran ahead of the transport");
    reading.store(0, Ordering::Release);
    eventually("every command released", || ring.released().load(Ordering::Acquire) == 5);
    // It never moves back, whatever the transport says later.
    reading.store(4, Ordering::Release);
    std::thread::sleep(Duration::from_millis(20));
    assert_eq!(ring.released().load(Ordering::Acquire), 5);
    proxy.shutdown().unwrap();
}
