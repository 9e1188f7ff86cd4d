//! The FIFO protocol with CPU producers (wrap-around, back-pressure, no torn reads, exactly once
//! and in order per producer), the proxy with a mock transport (batching, counters, draining
//! shutdown, errors reaching the caller), and the emulated NIC's timing model.
use mkernel::abi::{FifoCmd, OP_WRITE};

// Buffer ids round-trip through a command whatever they are.
const BUF_INPUT: u64 = 0;
const BUF_OUTPUT: u64 = 1;
const BUF_FLAGS: u64 = 2;
use mkernel::comm::fifo::{Consumer, HostRing, RingMemory};
use mkernel::comm::proxy::{Proxy, ProxyConfig};
use mkernel::comm::transport::{FnTransport, NicModel};
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
        bytes: id.wrapping_mul(0x9e37_79b9_7f4a_7c15),
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
    assert_eq!(c.bytes, id.wrapping_mul(0x9e37_79b9_7f4a_7c15));
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
    );
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
    );
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
    );
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
