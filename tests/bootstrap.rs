//! The process group without GPUs: world variables, the TCP bootstrap among real processes on
//! loopback (including a rank that never joins: an error naming it, no hang), and the
//! launcher's fail-fast.
use mkernel::comm::bootstrap::frame::{self, Kind};
use mkernel::comm::bootstrap::Bootstrap;
use mkernel::comm::launch::{free_port, launch, LaunchSpec};
use mkernel::comm::world::World;
use mkernel::comm::CommError;
use mkernel::testing::mkernel_bin;
use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn bin() -> std::path::PathBuf {
    mkernel_bin(env!("CARGO_BIN_EXE_mkernel"))
}

fn vars(kv: &[(&str, &str)]) -> HashMap<String, String> {
    kv.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[test]
fn world_from_torchrun_variables() {
    let v = vars(&[
        ("RANK", "5"),
        ("WORLD_SIZE", "8"),
        ("LOCAL_RANK", "1"),
        ("LOCAL_WORLD_SIZE", "4"),
        ("MASTER_ADDR", "10.0.0.1"),
        ("MASTER_PORT", "29500"),
    ]);
    let w = World::from_vars(|k| v.get(k).cloned()).unwrap();
    assert_eq!((w.rank, w.node, w.nodes, w.device, w.local_rank), (5, 1, 2, 1, 1));
    assert!(w.is_local(4) && w.is_local(7) && !w.is_local(3));
    assert_eq!(w.local_to_global(2), 6);
}

#[test]
fn world_rules_name_the_variable() {
    let check = |kv: &[(&str, &str)], var: &str| {
        let v = vars(kv);
        match World::from_vars(|k| v.get(k).cloned()) {
            Err(CommError::Env { var: got, rule }) => assert_eq!(got, var, "{rule}"),
            other => panic!("expected an error about {var}, got {other:?}"),
        }
    };
    check(&[("WORLD_SIZE", "4")], "RANK");
    check(&[("RANK", "4"), ("WORLD_SIZE", "4"), ("MASTER_PORT", "1")], "RANK");
    check(&[("RANK", "0"), ("WORLD_SIZE", "6"), ("LOCAL_WORLD_SIZE", "4"), ("MASTER_PORT", "1")], "LOCAL_WORLD_SIZE");
    check(
        &[("RANK", "5"), ("WORLD_SIZE", "8"), ("LOCAL_RANK", "0"), ("LOCAL_WORLD_SIZE", "4"), ("MASTER_PORT", "1")],
        "LOCAL_RANK",
    );
    check(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "x")], "MASTER_PORT");
    check(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "0")], "MASTER_PORT");
    check(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "70000")], "MASTER_PORT");
    check(&[("RANK", "0"), ("WORLD_SIZE", "100000"), ("MASTER_PORT", "1")], "WORLD_SIZE");
    check(&[("RANK", "-1"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "1")], "RANK");
    let v = vars(&[("RANK", "0"), ("WORLD_SIZE", "2"), ("MASTER_PORT", "70000")]);
    let e = World::from_vars(|k| v.get(k).cloned()).unwrap_err().to_string();
    assert!(e.contains("70000 must be a TCP port in 1..=65535"), "{e}");
    check(
        &[("RANK", "0"), ("WORLD_SIZE", "2"), ("LOCAL_WORLD_SIZE", "1"), ("MKERNEL_NODES", "3"), ("MASTER_PORT", "1")],
        "MKERNEL_NODES",
    );
}

#[test]
fn bootstrap_among_processes() {
    let spec = LaunchSpec {
        nprocs: 5,
        nodes: 1,
        gpus: None,
        program: bin().into(),
        args: vec!["rank-check".into(), "bootstrap".into()],
        env: vec![],
        timeout: Duration::from_secs(60),
    };
    launch(&spec).unwrap();
}

#[test]
fn a_rank_that_never_joins_is_named() {
    // World of 4, rank 2 never started: every started rank must fail, naming rank 2, promptly.
    let port = free_port().unwrap().to_string();
    let start = Instant::now();
    let children: Vec<_> = [0u32, 1, 3]
        .iter()
        .map(|&r| {
            let c = Command::new(bin())
                .args(["rank-check", "bootstrap", "--timeout-ms", "1500"])
                .env("RANK", r.to_string())
                .env("WORLD_SIZE", "4")
                .env("MASTER_ADDR", "127.0.0.1")
                .env("MASTER_PORT", &port)
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            (r, c)
        })
        .collect();
    for (r, c) in children {
        let out = c.wait_with_output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "rank {r} succeeded without rank 2");
        assert!(err.contains("[2]"), "rank {r} did not name the missing rank: {err}");
    }
    assert!(start.elapsed() < Duration::from_secs(15), "took {:?}", start.elapsed());
}

#[test]
fn launcher_fails_fast_and_names_the_rank() {
    let start = Instant::now();
    let spec = LaunchSpec {
        nprocs: 3,
        nodes: 1,
        gpus: None,
        program: "sh".into(),
        args: vec!["-c".into(), "if [ \"$RANK\" = 1 ]; then exit 3; fi; sleep 30".into()],
        env: vec![],
        timeout: Duration::from_secs(60),
    };
    match launch(&spec) {
        Err(CommError::RankFailed { rank, status }) => {
            assert_eq!(rank, 1);
            assert!(status.contains("exit code 3"), "{status}");
        }
        other => panic!("expected rank 1 to fail, got {other:?}"),
    }
    assert!(start.elapsed() < Duration::from_secs(10), "the other ranks were not stopped: {:?}", start.elapsed());
}

#[test]
fn launcher_sets_the_process_group() {
    let spec = LaunchSpec {
        nprocs: 4,
        nodes: 2,
        gpus: Some(vec![0, 0, 1, 1]),
        program: "sh".into(),
        args: vec![
            "-c".into(),
            "test \"$WORLD_SIZE\" = 4 && test \"$LOCAL_WORLD_SIZE\" = 2 && test \"$LOCAL_RANK\" = $((RANK % 2)) && test \"$MKERNEL_NODES\" = 2 && test \"$MKERNEL_DEVICE\" = $((RANK / 2)) && test \"$NCCL_NVLS_ENABLE\" = 0".into(),
        ],
        env: vec![],
        timeout: Duration::from_secs(20),
    };
    launch(&spec).unwrap();
    let bad = LaunchSpec { nodes: 3, ..spec };
    assert!(matches!(launch(&bad), Err(CommError::InvalidArgument { arg: "nodes", .. })));
}

// ---- Fault matrix: bootstrap (in-process ranks on loopback) -----------------------------------

fn world(rank: u32, size: u32, port: u16) -> World {
    World {
        rank,
        world_size: size,
        local_rank: rank,
        local_world_size: size,
        node: 0,
        nodes: 1,
        device: 0,
        master_addr: "127.0.0.1".into(),
        master_port: port,
    }
}

const T: Duration = Duration::from_millis(1500);

/// A rank in a thread: join, then `steps` all-gathers; the first error as text.
fn rank(rank: u32, size: u32, port: u16, steps: u64) -> JoinHandle<Result<(), String>> {
    std::thread::spawn(move || {
        let mut b = Bootstrap::connect(&world(rank, size, port), T).map_err(|e| e.to_string())?;
        for i in 0..steps {
            let all = b.all_gather(&[rank as u8, i as u8]).map_err(|e| e.to_string())?;
            assert!(all.iter().enumerate().all(|(r, v)| v[..] == [r as u8, i as u8]));
        }
        Ok(())
    })
}

fn err_of(h: JoinHandle<Result<(), String>>) -> String {
    h.join().unwrap().expect_err("succeeded")
}

/// Connect to rank 0 once it listens.
fn dial(port: u16) -> TcpStream {
    let start = Instant::now();
    loop {
        if let Ok(s) = TcpStream::connect(("127.0.0.1", port)) {
            s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
            return s;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "rank 0 never listened");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn send(s: &mut TcpStream, kind: Kind, seq: u64, rank: u32, payload: &[u8]) {
    s.write_all(&frame::encode(kind, seq, rank, payload).unwrap()).unwrap();
}

/// A hand-driven rank: HELLO for `rank` of `size`, and the acknowledgement read.
fn raw_join(port: u16, rank: u32, size: u32) -> TcpStream {
    let mut s = dial(port);
    send(&mut s, Kind::Hello, 0, rank, &size.to_le_bytes());
    let mut h = [0u8; frame::HEADER];
    s.read_exact(&mut h).unwrap();
    assert_eq!(frame::decode_header(&h).unwrap().kind, Kind::Result);
    s
}

#[test]
fn strangers_on_the_port_do_not_disturb_the_join() {
    let port = free_port().unwrap();
    let r0 = rank(0, 3, port, 2);
    let mut silent = dial(port); // connects and never speaks
    let mut http = dial(port);
    http.write_all(b"GET / HTTP/1.0\r\n\r\n").unwrap();
    let mut huge = dial(port);
    let mut h = frame::encode(Kind::Hello, 0, 1, &[]).unwrap();
    h[20..24].copy_from_slice(&u32::MAX.to_le_bytes());
    huge.write_all(&h).unwrap();
    let mut kind9 = dial(port);
    let mut k = frame::encode(Kind::Hello, 0, 1, &3u32.to_le_bytes()).unwrap();
    k[4..8].copy_from_slice(&9u32.to_le_bytes());
    kind9.write_all(&k).unwrap();
    let (r1, r2) = (rank(1, 3, port, 2), rank(2, 3, port, 2));
    for (r, h) in [(0, r0), (1, r1), (2, r2)] {
        h.join().unwrap().unwrap_or_else(|e| panic!("rank {r}: {e}"));
    }
    silent.write_all(b"x").ok();
}

#[test]
fn groups_one_after_another_on_one_port() {
    // A group ends (every bootstrap dropped) and the next starts at once on the same port: rank
    // 0's listener is closed when its bootstrap is gone, so the new one binds it, and no rank
    // of the new group reaches the old one. The port is below Linux's ephemeral range: another
    // test's `free_port` cannot take it between two rounds.
    let port = (21_000..22_000).find(|&p| std::net::TcpListener::bind(("127.0.0.1", p)).is_ok()).unwrap();
    for round in 0..5 {
        let hs = [rank(0, 3, port, 3), rank(1, 3, port, 3), rank(2, 3, port, 3)];
        for (r, h) in hs.into_iter().enumerate() {
            h.join().unwrap().unwrap_or_else(|e| panic!("round {round}, rank {r}: {e}"));
        }
    }
}

#[test]
fn duplicate_rank_in_world_2_fails_every_rank() {
    // The group is complete when the duplicate arrives: it is told at once, and the group's next
    // step fails on every rank with the cause.
    let port = free_port().unwrap();
    let (g0, g1) = (
        std::thread::spawn(move || Bootstrap::connect(&world(0, 2, port), T).unwrap()),
        std::thread::spawn(move || Bootstrap::connect(&world(1, 2, port), T).unwrap()),
    );
    let (mut b0, mut b1) = (g0.join().unwrap(), g1.join().unwrap());
    let dup = Bootstrap::connect(&world(1, 2, port), T).err().expect("the duplicate joined").to_string();
    assert!(dup.contains("RANK=1") && dup.contains("after all 2 ranks had joined (duplicate RANK?)"), "{dup}");
    let h0 = std::thread::spawn(move || b0.barrier().unwrap_err().to_string());
    let e1 = b1.barrier().unwrap_err().to_string();
    let e0 = h0.join().unwrap();
    for e in [&e0, &e1] {
        assert!(e.contains("a second process with RANK=1 tried to join (duplicate RANK?)"), "{e}");
    }
    assert!(e1.contains("rank 0 reported"), "{e1}");
}

#[test]
fn duplicate_rank_in_world_3_fails_every_rank() {
    let port = free_port().unwrap();
    let hs = [rank(0, 3, port, 1), rank(1, 3, port, 1), rank(1, 3, port, 1)];
    for h in hs {
        let e = err_of(h);
        assert!(e.contains("join failed: two processes have RANK=1"), "{e}");
    }
}

#[test]
fn a_second_rank_0_fails_every_rank() {
    // World 3 with rank 2 absent, so the join is still open when the second rank 0 appears.
    let port = free_port().unwrap();
    let (r0, r1) = (rank(0, 3, port, 1), rank(1, 3, port, 1));
    drop(dial(port));
    std::thread::sleep(Duration::from_millis(100));
    let dup = Bootstrap::connect(&world(0, 3, port), T).err().unwrap().to_string();
    assert!(dup.contains("already served: another process has RANK=0") && dup.contains("told the process"), "{dup}");
    for h in [r0, r1] {
        let e = err_of(h);
        assert!(e.contains("two processes have RANK=0"), "{e}");
    }
}

#[test]
fn a_world_size_mismatch_fails_every_rank() {
    let port = free_port().unwrap();
    let hs = [rank(0, 3, port, 1), rank(1, 3, port, 1), rank(2, 4, port, 1)];
    for h in hs {
        let e = err_of(h);
        assert!(e.contains("a process with RANK=2 has WORLD_SIZE=4, rank 0 has 3"), "{e}");
    }
}

#[test]
fn a_rank_that_never_connects_is_named_on_every_rank() {
    let port = free_port().unwrap();
    let start = Instant::now();
    for h in [rank(0, 3, port, 1), rank(1, 3, port, 1)] {
        let e = err_of(h);
        assert!(e.contains("join") && e.contains("rank(s) [2] did not arrive"), "{e}");
    }
    assert!(start.elapsed() < Duration::from_secs(4), "{:?}", start.elapsed());
}

#[test]
fn a_rank_dying_after_its_hello_is_named_on_every_rank() {
    let port = free_port().unwrap();
    let (r0, r1) = (rank(0, 3, port, 1), rank(1, 3, port, 1));
    let mut s = dial(port);
    send(&mut s, Kind::Hello, 0, 2, &3u32.to_le_bytes());
    drop(s);
    for h in [r0, r1] {
        let e = err_of(h);
        assert!(e.contains("rank 2 left during the join") || e.contains("rank 2 disconnected"), "{e}");
    }
}

#[test]
fn a_rank_dying_between_steps_is_named_on_every_rank() {
    let port = free_port().unwrap();
    let (r0, r1) = (rank(0, 3, port, 3), rank(1, 3, port, 3));
    rank(2, 3, port, 1).join().unwrap().unwrap(); // one step, then it is gone
    for h in [r0, r1] {
        let e = err_of(h);
        assert!(e.contains("rank 2 disconnected during all_gather #2"), "{e}");
    }
}

#[test]
fn rank_0_dying_is_named_on_every_rank() {
    let port = free_port().unwrap();
    let (r1, r2) = (rank(1, 3, port, 2), rank(2, 3, port, 2));
    rank(0, 3, port, 0).join().unwrap().unwrap(); // joins, then exits
    for h in [r1, r2] {
        let e = err_of(h);
        assert!(e.contains("rank 0 did not answer all_gather #1"), "{e}");
    }
}

#[test]
fn a_peer_alive_but_silent_is_named_on_every_rank() {
    let port = free_port().unwrap();
    let (r0, r1) = (rank(0, 3, port, 1), rank(1, 3, port, 1));
    let stuck = raw_join(port, 2, 3); // joined, then never sends
    for h in [r0, r1] {
        let e = err_of(h);
        assert!(e.contains("all_gather #1") && e.contains("rank(s) [2] did not arrive"), "{e}");
    }
    drop(stuck);
}

#[test]
fn a_peer_alive_but_not_reading_cannot_block_a_write() {
    // Rank 2 sends its part and then never reads: rank 0's answer (3 x 8 MiB) fills the socket
    // buffers. The write is bounded; every rank learns why.
    let port = free_port().unwrap();
    let big = |r: u32| {
        std::thread::spawn(move || {
            let mut b = Bootstrap::connect(&world(r, 3, port), T).map_err(|e| e.to_string())?;
            b.all_gather(&vec![r as u8; 8 << 20]).map_err(|e| e.to_string())?;
            b.barrier().map_err(|e| e.to_string())
        })
    };
    let start = Instant::now();
    let (r0, r1) = (big(0), big(1));
    let mut stuck = raw_join(port, 2, 3);
    send(&mut stuck, Kind::Gather, 1, 2, &vec![2u8; 8 << 20]);
    for h in [r0, r1] {
        let e = err_of(h);
        assert!(e.contains("answering rank 2 in all_gather #1") && e.contains("not reading"), "{e}");
    }
    assert!(start.elapsed() < Duration::from_secs(8), "{:?}", start.elapsed());
    drop(stuck);
}

#[test]
fn the_frame_limit_is_checked_by_the_sender_and_reported_to_all() {
    let port = free_port().unwrap();
    let r0 = rank(0, 2, port, 1);
    let mut b1 = Bootstrap::connect(&world(1, 2, port), T).unwrap();
    match b1.all_gather(&vec![0u8; frame::MAX_PAYLOAD + 1]) {
        Err(CommError::InvalidArgument { arg: "data", rule }) => assert!(rule.contains("exceed"), "{rule}"),
        other => panic!("{other:?}"),
    }
    let e = err_of(r0);
    assert!(e.contains("rank 1 gave up during all_gather #1") && e.contains("`data`"), "{e}");
}

#[test]
fn error_lines_stay_short() {
    let e = CommError::Missing { op: "join".into(), rank: 0, missing: (1..65536).collect(), waited_ms: 1 };
    let s = e.to_string();
    assert!(s.len() < 200 && s.contains("(65535 ranks)"), "{} bytes: {s}", s.len());
    let v = vars(&[("RANK", "0"), ("WORLD_SIZE", &"9".repeat(100_000))]);
    let s = World::from_vars(|k| v.get(k).cloned()).unwrap_err().to_string();
    assert!(s.len() < 200, "{} bytes", s.len());
}

/// Rank `who` of 3 takes one step, then gives up with `why` (`Bootstrap::abort`, as a rank
/// whose communicator setup failed does); the other two, taking two steps, fail with the cause.
fn gives_up(who: u32, why: &'static str) {
    let port = free_port().unwrap();
    let others: Vec<_> = (0..3).filter(|&r| r != who).map(|r| rank(r, 3, port, 2)).collect();
    std::thread::spawn(move || {
        let mut b = Bootstrap::connect(&world(who, 3, port), T).unwrap();
        b.all_gather(&[who as u8, 0]).unwrap();
        b.abort(why);
    })
    .join()
    .unwrap();
    for h in others {
        let e = err_of(h);
        assert!(e.contains(&format!("rank {who} gave up: {why}")), "{e}");
    }
}

#[test]
fn a_rank_that_gives_up_between_steps_is_heard_with_its_cause() {
    gives_up(1, "its heap allocation failed");
    gives_up(0, "its FIFO could not be mapped");
}

#[test]
fn an_unresolvable_master_addr_is_named_within_the_timeout() {
    // The lookup runs within the join's bound (a slow name service cannot hold it past it).
    let w = World { master_addr: "no-such-host.invalid".into(), ..world(1, 2, 1) };
    let t0 = Instant::now();
    let e = Bootstrap::connect(&w, T).err().expect("joined through a name that does not exist").to_string();
    assert!(e.contains("MASTER_ADDR no-such-host.invalid"), "{e}");
    assert!(t0.elapsed() < T + Duration::from_secs(2), "took {:?}", t0.elapsed());
}
