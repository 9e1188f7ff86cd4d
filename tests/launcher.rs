//! The launcher's fault matrix (CPU only): a rank ending right at the deadline, ranks leaving
//! processes that hold their output pipes, a signal to the launcher, non-UTF-8 output. Nothing may
//! hang and no rank may outlive the launch.
use mkernel::comm::launch::{launch, LaunchSpec};
use mkernel::comm::CommError;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::mpsc::channel;
use std::time::{Duration, Instant};

fn bin() -> std::path::PathBuf {
    mkernel::testing::mkernel_bin(env!("CARGO_BIN_EXE_mkernel"))
}

fn sh(nprocs: u32, script: &str, timeout: Duration) -> LaunchSpec {
    LaunchSpec {
        nprocs,
        nodes: 1,
        gpus: None,
        program: "sh".into(),
        args: vec!["-c".into(), script.into()],
        env: vec![],
        timeout,
    }
}

/// True once `pid` is gone or a zombie (its parent may not have reaped it yet).
fn dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat.rsplit(')').next().is_some_and(|rest| rest.trim_start().starts_with('Z')),
    }
}

fn all_dead_soon(pids: &[u32]) -> bool {
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        if pids.iter().all(|&p| dead(p)) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    false
}

/// Numbers after `key=` in `text`.
fn pids(text: &str, key: &str) -> Vec<u32> {
    text.split_whitespace().filter_map(|w| w.strip_prefix(key)).filter_map(|v| v.parse().ok()).collect()
}

#[test]
fn ranks_ending_at_the_deadline_never_panic() {
    // Ranks exit around the deadline; the launcher must answer Ok or a timeout error naming a rank.
    for sleep_ms in [180, 200, 210, 220, 240] {
        let script = format!("sleep {}", sleep_ms as f64 / 1000.0);
        match launch(&sh(3, &script, Duration::from_millis(200))) {
            Ok(()) => {}
            Err(CommError::RankFailed { status, .. }) => assert!(status.contains("still running after"), "{status}"),
            Err(e) => panic!("{sleep_ms} ms: {e}"),
        }
    }
}

#[test]
fn a_zero_deadline_is_rejected() {
    match launch(&sh(1, "true", Duration::ZERO)) {
        Err(CommError::InvalidArgument { arg: "timeout", .. }) => {}
        other => panic!("{other:?}"),
    }
}

#[test]
fn processes_holding_a_rank_pipes_do_not_keep_the_launcher_alive() {
    // Each rank exits 0 at once, leaving a `sleep 30` that holds its stdout and stderr.
    let start = Instant::now();
    let out = Command::new(bin())
        .args(["launch", "-n", "2", "--timeout-s", "60", "--", "sh", "-c", "sleep 30 & echo bg=$!"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(start.elapsed() < Duration::from_secs(10), "launcher held on for {:?}", start.elapsed());
    let bg = pids(&stdout, "bg=");
    assert_eq!(bg.len(), 2, "{stdout}");
    assert!(all_dead_soon(&bg), "background processes {bg:?} survived the launch");
}

#[test]
fn a_rank_failure_also_kills_what_the_other_ranks_started() {
    let script = "sleep 30 & echo bg=$!; if [ \"$RANK\" = 1 ]; then sleep 0.2; exit 4; fi; wait";
    let out = Command::new(bin())
        .args(["launch", "-n", "3", "--timeout-s", "60", "--", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("rank 1 failed (exit code 4)"), "{err}");
    let bg = pids(&String::from_utf8_lossy(&out.stdout), "bg=");
    assert_eq!(bg.len(), 3);
    assert!(all_dead_soon(&bg), "{bg:?} survived");
}

#[test]
fn no_rank_survives_a_signal_to_the_launcher() {
    for (signal, name) in [(libc::SIGTERM, "SIGTERM"), (libc::SIGINT, "SIGINT")] {
        let script = "sleep 30 & echo pid=$$ bg=$!; wait";
        let mut launcher = Command::new(bin())
            .args(["launch", "-n", "3", "--timeout-s", "60", "--", "sh", "-c", script])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = channel();
        let stdout = launcher.stdout.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let _ = tx.send(line);
            }
        });
        let mut seen = Vec::new();
        while seen.len() < 3 {
            seen.push(rx.recv_timeout(Duration::from_secs(10)).expect("ranks did not start"));
        }
        let text = seen.join("\n");
        let victims: Vec<u32> = pids(&text, "pid=").into_iter().chain(pids(&text, "bg=")).collect();
        assert_eq!(victims.len(), 6, "{text}");
        // SAFETY: signalling the launcher this test started.
        unsafe { libc::kill(launcher.id() as i32, signal) };
        let start = Instant::now();
        let status = loop {
            if let Some(st) = launcher.try_wait().unwrap() {
                break st;
            }
            assert!(start.elapsed() < Duration::from_secs(10), "{name}: the launcher did not exit");
            std::thread::sleep(Duration::from_millis(10));
        };
        assert_eq!(status.code(), Some(128 + signal), "{name}");
        let mut err = String::new();
        std::io::Read::read_to_string(&mut launcher.stderr.take().unwrap(), &mut err).unwrap();
        assert!(err.contains(&format!("got signal {signal}; every rank was killed")), "{name}: {err}");
        assert!(all_dead_soon(&victims), "{name}: {victims:?} survived");
    }
}

#[test]
fn non_utf8_output_is_forwarded_byte_for_byte() {
    let script = "printf 'a\\377b\\n'; printf 'no newline \\376'; printf 'err \\377\\n' >&2; echo done";
    let out = Command::new(bin())
        .args(["launch", "-n", "1", "--timeout-s", "20", "--", "sh", "-c", script])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let has = |hay: &[u8], needle: &[u8]| hay.windows(needle.len()).any(|w| w == needle);
    assert!(has(&out.stdout, b"[rank 0] a\xffb\n"), "{:?}", String::from_utf8_lossy(&out.stdout));
    assert!(has(&out.stdout, b"[rank 0] no newline \xfedone\n"), "{:?}", String::from_utf8_lossy(&out.stdout));
    assert!(has(&out.stderr, b"[rank 0] err \xff\n"));
}

#[test]
fn one_hardware_queue_with_emulated_nodes_is_rejected_before_anything_starts() {
    // The emulated NIC's copies would queue behind the kernels that wait for them.
    let mut spec = sh(2, "exit 3", Duration::from_secs(5)); // it would fail if it ran
    spec.nodes = 2;
    spec.env.push(("CUDA_DEVICE_MAX_CONNECTIONS".into(), "1".into()));
    match launch(&spec) {
        Err(CommError::InvalidArgument { arg: "env", rule }) => {
            assert!(rule.contains("CUDA_DEVICE_MAX_CONNECTIONS=1"), "{rule}")
        }
        other => panic!("{other:?}"),
    }
    // One node has no emulated NIC: the same setting is fine there.
    spec.nodes = 1;
    spec.args = vec!["-c".into(), "true".into()];
    launch(&spec).unwrap();
}
