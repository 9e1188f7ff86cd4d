//! The launcher behind `mkernel launch -n N [--nodes K] -- program args`: starts one process per
//! rank with the process-group variables set, can split the local GPUs into K emulated nodes
//! (so the inter-node path runs end to end on one host), forwards output with `[rank r]`
//! prefixes, and fails fast: when one rank fails, the others are killed and the error names it.
//!
//! Nothing outlives a launch: every rank runs in its own process group, and that group is killed
//! when the rank fails, when the deadline passes, when the launcher gets SIGINT / SIGTERM /
//! SIGHUP, and when a finished rank left processes behind that still hold its output pipes. Ranks
//! also get SIGKILL if the launching thread dies (`PR_SET_PDEATHSIG`), which covers a launcher
//! killed by SIGKILL. Output is forwarded byte for byte (non-UTF-8 included), line by line.
use super::error::{io, CommError, CommResult};
use super::signals::SignalGuard;
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The deadline of a launch when the caller names none: 15 minutes.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(900);

/// How long the launcher waits for killed ranks to exit before it reports them and returns.
const KILL_GRACE: Duration = Duration::from_secs(10);
/// How long output pumps may run on after their rank ended before its group is killed.
const PIPE_GRACE: Duration = Duration::from_millis(500);

/// What to launch.
#[derive(Clone, Debug)]
pub struct LaunchSpec {
    /// Ranks to start (`WORLD_SIZE`), all on this host.
    pub nprocs: u32,
    /// Emulated nodes (1: all ranks on one node). Must divide `nprocs`.
    pub nodes: u32,
    /// GPU ordinal of each rank (default: rank r uses GPU r).
    pub gpus: Option<Vec<u32>>,
    /// The program every rank runs.
    pub program: OsString,
    /// Its arguments, the same for every rank (ranks tell themselves apart by `RANK`).
    pub args: Vec<OsString>,
    /// Extra environment for every rank.
    pub env: Vec<(String, String)>,
    /// Kill everything after this long ([`DEFAULT_TIMEOUT`] when unsure; there is no "no limit").
    pub timeout: Duration,
}

/// Pick a free TCP port on loopback for rank 0's bootstrap.
pub fn free_port() -> CommResult<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a free port"))?;
    Ok(l.local_addr().map_err(io("local_addr"))?.port())
}

/// Copy `from` to the launcher's stdout or stderr, one `[rank r] ` prefixed line at a time, bytes
/// as they are. Keeps reading when the launcher's own output is gone, so the rank never dies of
/// SIGPIPE because of the launcher.
fn forward<R: std::io::Read + Send + 'static>(rank: u32, from: R, to_stderr: bool) -> CommResult<JoinHandle<()>> {
    let name = format!("rank-{rank}-{}", if to_stderr { "stderr" } else { "stdout" });
    let pump = move || {
        let mut r = BufReader::new(from);
        let mut line = Vec::new();
        loop {
            line.clear();
            match r.read_until(b'\n', &mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            if !line.ends_with(b"\n") {
                line.push(b'\n');
            }
            let mut out = format!("[rank {rank}] ").into_bytes();
            out.extend_from_slice(&line);
            // One write per line, so lines of different ranks do not interleave.
            let _ = if to_stderr {
                std::io::stderr().lock().write_all(&out)
            } else {
                std::io::stdout().lock().write_all(&out)
            };
        }
    };
    std::thread::Builder::new().name(name).spawn(pump).map_err(io(format!("starting rank {rank}'s output pump")))
}

/// A started rank: its process and its two output pumps.
struct Rank {
    rank: u32,
    child: Child,
    exited: bool,
    pumps: Vec<JoinHandle<()>>,
}

impl Rank {
    fn pumps_done(&self) -> bool {
        self.pumps.iter().all(JoinHandle::is_finished)
    }
}

fn check(spec: &LaunchSpec) -> CommResult<()> {
    let bad = |arg, rule: String| Err(CommError::InvalidArgument { arg, rule });
    if spec.nprocs == 0 {
        return bad("nprocs", "0 must be at least 1".into());
    }
    if spec.nodes == 0 || !spec.nprocs.is_multiple_of(spec.nodes) {
        return bad("nodes", format!("{} must divide the {} processes", spec.nodes, spec.nprocs));
    }
    if let Some(g) = &spec.gpus {
        if g.len() != spec.nprocs as usize {
            return bad("gpus", format!("{} GPUs listed for {} processes", g.len(), spec.nprocs));
        }
    }
    if spec.timeout.is_zero() {
        return bad("timeout", "0 s must be at least 1 ms".into());
    }
    // What the ranks will see (spec.env wins over the launcher's own environment). With one
    // hardware queue, the emulated NIC's copies between emulated nodes queue behind the
    // persistent kernel waiting for them (see transport::EmulatedNic).
    let conns = spec.env.iter().rev().find(|(k, _)| k == "CUDA_DEVICE_MAX_CONNECTIONS").map(|(_, v)| v.clone());
    let conns = conns.or_else(|| std::env::var("CUDA_DEVICE_MAX_CONNECTIONS").ok());
    if spec.nodes > 1 && conns.as_deref().map(str::trim) == Some("1") {
        let rule = "CUDA_DEVICE_MAX_CONNECTIONS=1 with emulated nodes: the emulated NIC's copies would wait \
                    behind the kernels waiting for them; unset it or use 2 or more"
            .into();
        return bad("env", rule);
    }
    Ok(())
}

fn command(spec: &LaunchSpec, r: u32, port: &str) -> Command {
    let local = spec.nprocs / spec.nodes;
    let gpu = spec.gpus.as_ref().map(|g| g[r as usize]).unwrap_or(r);
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .env("RANK", r.to_string())
        .env("WORLD_SIZE", spec.nprocs.to_string())
        .env("LOCAL_RANK", (r % local).to_string())
        .env("LOCAL_WORLD_SIZE", local.to_string())
        .env("MKERNEL_NODES", spec.nodes.to_string())
        .env("MKERNEL_DEVICE", gpu.to_string())
        .env("MASTER_ADDR", "127.0.0.1")
        .env("MASTER_PORT", port)
        // Never NVLink multicast on shared machines.
        .env("NCCL_NVLS_ENABLE", "0")
        .env("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
        .env("NVSHMEM_DISABLE_NVLS", "1")
        // Own process group, so stopping a rank stops everything it started.
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in &spec.env {
        cmd.env(k, v);
    }
    // SAFETY: the closure runs in the child between fork and exec and only makes
    // async-signal-safe calls (prctl, getppid, _exit).
    unsafe {
        let launcher = libc::getpid();
        cmd.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            // The launcher may have died before prctl took effect.
            if libc::getppid() != launcher {
                libc::_exit(1);
            }
            Ok(())
        });
    }
    cmd
}

/// Run all ranks to completion. Ok when every rank exits 0; otherwise the first failure (a rank
/// that failed, the deadline, or a signal to the launcher), with every rank's process group
/// killed.
pub fn launch(spec: &LaunchSpec) -> CommResult<()> {
    check(spec)?;
    let signals = SignalGuard::install()?;
    let port = free_port()?.to_string();
    let mut ranks: Vec<Rank> = Vec::new();
    let mut failure: Option<CommError> = None;
    for r in 0..spec.nprocs {
        match command(spec, r, &port).spawn() {
            Ok(mut child) => {
                let out = child.stdout.take().map(|o| forward(r, o, false));
                let err = child.stderr.take().map(|e| forward(r, e, true));
                let mut rank = Rank { rank: r, child, exited: false, pumps: Vec::new() };
                for p in [out, err].into_iter().flatten() {
                    match p {
                        Ok(p) => rank.pumps.push(p),
                        Err(e) => {
                            failure.get_or_insert(e);
                        }
                    }
                }
                ranks.push(rank);
            }
            Err(e) => {
                failure = Some(io(format!("starting rank {r}: {}", spec.program.to_string_lossy()))(e));
            }
        }
        if failure.is_some() {
            break;
        }
    }
    let start = Instant::now();
    while failure.is_none() {
        for rk in ranks.iter_mut().filter(|rk| !rk.exited) {
            match rk.child.try_wait() {
                Ok(Some(st)) => {
                    rk.exited = true;
                    if !st.success() {
                        failure.get_or_insert(CommError::RankFailed { rank: rk.rank, status: describe(st) });
                    }
                }
                Ok(None) => {}
                Err(e) => {
                    failure.get_or_insert(io(format!("waiting for rank {}", rk.rank))(e));
                }
            }
        }
        let running: Vec<u32> = ranks.iter().filter(|rk| !rk.exited).map(|rk| rk.rank).collect();
        if failure.is_some() || running.is_empty() {
            break;
        }
        if let Some(signal) = signals.seen() {
            failure = Some(CommError::Interrupted { signal, ranks: running.len() as u32 });
        } else if start.elapsed() > spec.timeout {
            failure = Some(CommError::RankFailed {
                rank: running[0],
                status: format!("still running after {:?} (ranks {} killed)", spec.timeout, rank_list(&running)),
            });
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for rk in ranks.iter_mut().filter(|rk| !rk.exited) {
        kill_group(&mut rk.child);
    }
    // Reap them, bounded: a rank in uninterruptible sleep (inside a hung GPU driver) outlives
    // SIGKILL, and waiting for it would hide the failure found above forever.
    let until = Instant::now() + KILL_GRACE;
    loop {
        for rk in ranks.iter_mut().filter(|rk| !rk.exited) {
            rk.exited = !matches!(rk.child.try_wait(), Ok(None));
        }
        let left: Vec<u32> = ranks.iter().filter(|rk| !rk.exited).map(|rk| rk.rank).collect();
        if left.is_empty() {
            break;
        }
        if Instant::now() >= until {
            let pids: Vec<u32> = ranks.iter().filter(|rk| !rk.exited).map(|rk| rk.child.id()).collect();
            let note = format!(
                "ranks {} (pids {pids:?}) did not exit {KILL_GRACE:?} after SIGKILL (stuck in the GPU driver?); left behind",
                rank_list(&left)
            );
            eprintln!("mkernel launch: {note}");
            failure.get_or_insert(CommError::RankFailed { rank: left[0], status: note });
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    // A rank that exited may have left processes in its group holding its pipes: give its pumps a
    // moment, then kill the group; pumps still running after that are left behind, not joined.
    let wait_pumps = |ranks: &[Rank], grace: Duration| {
        let until = Instant::now() + grace;
        while Instant::now() < until && !ranks.iter().all(Rank::pumps_done) {
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    wait_pumps(&ranks, PIPE_GRACE);
    for rk in ranks.iter_mut().filter(|rk| !rk.pumps_done()) {
        kill_group(&mut rk.child);
    }
    wait_pumps(&ranks, PIPE_GRACE);
    let mut cut: Vec<u32> = Vec::new();
    for rk in ranks {
        if rk.pumps_done() {
            for p in rk.pumps {
                let _ = p.join();
            }
        } else {
            cut.push(rk.rank);
        }
    }
    if !cut.is_empty() {
        // Not an error of the launch (its ranks ended as reported), but its output may be short.
        eprintln!(
            "mkernel launch: the output of ranks {} may be incomplete: processes they left kept their pipes open \
             past their process groups' kill",
            rank_list(&cut)
        );
    }
    failure.map_or(Ok(()), Err)
}

/// `[1, 2, 5]`, or the first and last few of a long list with the count.
pub(crate) fn rank_list(ranks: &[u32]) -> String {
    if ranks.len() <= 16 {
        return format!("{ranks:?}");
    }
    let head: Vec<String> = ranks[..8].iter().map(u32::to_string).collect();
    let tail: Vec<String> = ranks[ranks.len() - 4..].iter().map(u32::to_string).collect();
    format!("[{}, ... {}] ({} ranks)", head.join(", "), tail.join(", "), ranks.len())
}

fn kill_group(c: &mut Child) {
    // SAFETY: signalling the process group this launcher created for the child (its id is the
    // group id); a group that is gone already makes this a no-op (ESRCH).
    unsafe { libc::kill(-(c.id() as i32), libc::SIGKILL) };
    let _ = c.kill();
}

fn describe(st: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        _ => "unknown status".into(),
    }
}
