//! The process group without GPUs: world variables, the TCP bootstrap among real processes on
//! loopback (including a rank that never joins: an error naming it, no hang), and the
//! launcher's fail-fast.
use mkernel::comm::launch::{free_port, launch, LaunchSpec};
use mkernel::comm::world::World;
use mkernel::comm::CommError;
use mkernel::testing::mkernel_bin;
use std::collections::HashMap;
use std::process::{Command, Stdio};
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
