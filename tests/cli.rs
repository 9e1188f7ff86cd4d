//! The `mkernel` binary as a script sees it: exit codes, help, and every bad value named with its
//! flag and rule before anything touches a GPU (these run on machines without one).
use std::process::{Command, Output};

fn mkernel(args: &[&str]) -> Output {
    Command::new(mkernel::testing::mkernel_bin(env!("CARGO_BIN_EXE_mkernel"))).args(args).output().expect("run mkernel")
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

#[test]
fn help_exits_zero_everywhere() {
    for args in [
        &["--help"][..],
        &["launch", "--help"],
        &["bench", "ag-gemm", "--help"],
        &["tune", "ag-gemm", "--help"],
        &["bench", "moe", "--help"],
        &["rank-check", "moe", "--help"],
    ] {
        let o = mkernel(args);
        assert_eq!(o.status.code(), Some(0), "{args:?}: {}", stderr(&o));
        assert!(String::from_utf8_lossy(&o.stdout).contains("Usage:"), "{args:?}");
    }
}

#[test]
fn bad_values_exit_2_naming_flag_and_rule() {
    let cases: &[(&[&str], &[&str])] = &[
        (&["bench", "gemm", "--shapes", "0x0x0"], &["--shapes", "M must be at least 1"]),
        (&["bench", "gemm", "--reps", "0"], &["--reps", "0 is not in 1..=100000"]),
        (&["bench", "allgather", "--sizes", "abc"], &["--sizes", "not a size"]),
        (&["bench", "ag-gemm", "--layouts", "xy"], &["--layouts", "`nk`"]),
        (&["bench", "ag-gemm", "--push-ctas", "0"], &["--push-ctas"]),
        (&["bench", "ag-gemm", "--trace-epochs", "1,2,3"], &["--trace-epochs", "not FIRST or FIRST,COUNT"]),
        (&["bench", "ag-gemm", "--trace-epochs", "0"], &["--trace-epochs", "FIRST must be at least 1"]),
        (&["launch", "--timeout", "2", "-n", "2", "--", "true"], &["--timeout"]),
        (&["launch", "-n", "0", "--", "true"], &["--nprocs", "0 is not in 1..=1024"]),
        (&["launch", "-n", "-1", "--", "true"], &["--nprocs", "-1 is not in 1..=1024"]),
        (&["launch", "-n", "x", "--", "true"], &["--nprocs", "`x` is not a whole number in 1..=1024"]),
        (&["launch", "--bogus", "-n", "2", "--", "true"], &["unexpected argument '--bogus'"]),
        (&["launch", "-n", "2", "--timeout-s", "0", "--", "true"], &["--timeout-s", "0 is not in 1.."]),
        (&["bench", "fifo", "--blocks", "x"], &["--blocks"]),
        (&["bench", "fifo", "--blocks", "0"], &["--blocks", "0 is not in 1..=65535"]),
        (&["bench", "fifo", "--rounds", "0"], &["--rounds", "0 is not in 1..=10000000"]),
        (&["rank-check", "gemm-rs", "--rounds", "0"], &["--rounds", "0 is not in 1.."]),
        (&["rank-check", "ag-gemm", "--rounds", "0"], &["--rounds", "0 is not in 1.."]),
        (&["bench", "moe", "--configs", "1x2x3"], &["--configs", "want five numbers TxHxIxExk"]),
        (&["bench", "moe", "--configs", "4096x0x2048x256x8"], &["--configs", "at least 1"]),
        (&["bench", "moe", "--pull-ctas", "0"], &["--pull-ctas"]),
        (&["tune", "moe", "--run-records", "0"], &["--run-records"]),
        (&["rank-check", "moe", "--config", "ax2x3x4x5"], &["--config", "`a`"]),
        (&["rank-check", "moe", "--routing", "zipf"], &["--routing", "zipf", "last"]),
        (&["no-such-command"], &["no-such-command"]),
    ];
    for (args, needles) in cases {
        let o = mkernel(args);
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?} should be a usage error: {err}");
        for n in *needles {
            assert!(err.contains(n), "{args:?}: `{n}` missing from: {err}");
        }
    }
}

/// A timeline counts epochs per op, so it takes one shape and one layout: refused before any
/// rank starts.
#[test]
fn a_timeline_takes_one_shape() {
    let o = mkernel(&["bench", "ag-gemm", "--trace", "t", "--shapes", "2048x4096x4096,4096x4096x4096"]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    assert!(stderr(&o).contains("--trace: one shape and one layout"), "{}", stderr(&o));
}

#[test]
fn gpu_commands_need_a_gpu_and_say_so() {
    // Exit 3 where no GPU is usable; a GPU machine runs the tiny benchmark instead (exit 0).
    let o = mkernel(&["bench", "gemm", "--shapes", "128x256x64", "--reps", "1", "--warmup", "0"]);
    match o.status.code() {
        Some(3) => assert!(stderr(&o).contains("no CUDA device"), "{}", stderr(&o)),
        Some(0) => {}
        other => panic!("exit {other:?}: {}", stderr(&o)),
    }
}

#[test]
fn launch_runs_ranks_and_reports_a_failed_one() {
    let o = mkernel(&["launch", "-n", "2", "--", "true"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let o = mkernel(&["launch", "-n", "2", "--timeout-s", "20", "--", "sh", "-c", "exit $RANK"]);
    assert_eq!(o.status.code(), Some(1));
    assert!(stderr(&o).contains("rank 1 failed"), "{}", stderr(&o));
}

#[test]
fn info_into_a_closed_pipe_ends_quietly() {
    use std::os::fd::{FromRawFd, OwnedFd};
    use std::os::unix::process::ExitStatusExt;
    use std::process::Stdio;
    // `mkernel info | head -1` once head has gone: a pipe whose reading end is closed before the
    // child starts, so its first line already meets a broken pipe.
    let mut fds = [0; 2];
    // SAFETY: `pipe` fills the two descriptors of a new pipe into an array of two.
    assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0, "pipe");
    // SAFETY: both descriptors are ours and open; the reading end is closed once, here.
    let writer = unsafe {
        libc::close(fds[0]);
        OwnedFd::from_raw_fd(fds[1])
    };
    let o = Command::new(mkernel::testing::mkernel_bin(env!("CARGO_BIN_EXE_mkernel")))
        .arg("info")
        .stdout(Stdio::from(writer))
        .stderr(Stdio::piped())
        .output()
        .expect("run mkernel info");
    let err = stderr(&o);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(o.status.signal(), Some(libc::SIGPIPE), "{:?}: {err}", o.status);
}
