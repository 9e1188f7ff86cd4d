//! The launcher behind `mkernel launch -n N [--nodes K] -- program args`: starts one process per
//! rank with the process-group variables set, can split the local GPUs into K emulated nodes
//! (so the inter-node path runs end to end on one host), forwards output with `[rank r]`
//! prefixes, and fails fast: when one rank fails, the others are killed and the error names it.
use super::error::{io, CommError, CommResult};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

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
    /// Kill everything after this long (None: no limit).
    pub timeout: Option<Duration>,
}

/// Pick a free TCP port on loopback for rank 0's bootstrap.
pub fn free_port() -> CommResult<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0").map_err(io("binding a free port"))?;
    Ok(l.local_addr().map_err(io("local_addr"))?.port())
}

fn forward<R: std::io::Read + Send + 'static>(rank: u32, from: R, to_stderr: bool) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(from).lines().map_while(Result::ok) {
            if to_stderr {
                let _ = writeln!(std::io::stderr(), "[rank {rank}] {line}");
            } else {
                let _ = writeln!(std::io::stdout(), "[rank {rank}] {line}");
            }
        }
    })
}

/// Run all ranks to completion. Ok when every rank exits 0; otherwise the first failure, with the
/// remaining ranks killed.
pub fn launch(spec: &LaunchSpec) -> CommResult<()> {
    let bad = |arg, rule: String| Err(CommError::InvalidArgument { arg, rule });
    if spec.nprocs == 0 {
        return bad("nprocs", "must be at least 1".into());
    }
    if spec.nodes == 0 || !spec.nprocs.is_multiple_of(spec.nodes) {
        return bad("nodes", format!("{} must divide the {} processes", spec.nodes, spec.nprocs));
    }
    if let Some(g) = &spec.gpus {
        if g.len() != spec.nprocs as usize {
            return bad("gpus", format!("{} GPUs listed for {} processes", g.len(), spec.nprocs));
        }
    }
    let local = spec.nprocs / spec.nodes;
    let port = free_port()?.to_string();
    let mut children: Vec<(u32, Child)> = Vec::new();
    let mut pumps = Vec::new();
    for r in 0..spec.nprocs {
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
            .env("MASTER_PORT", &port)
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
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => {
                for (_, c) in children.iter_mut() {
                    kill_group(c);
                }
                return Err(io(format!("starting rank {r}: {}", spec.program.to_string_lossy()))(e));
            }
        };
        pumps.push(forward(r, child.stdout.take().unwrap(), false));
        pumps.push(forward(r, child.stderr.take().unwrap(), true));
        children.push((r, child));
    }
    let start = Instant::now();
    let mut failure: Option<CommError> = None;
    let mut running: Vec<(u32, Child)> = children;
    while !running.is_empty() && failure.is_none() {
        let mut still = Vec::new();
        for (r, mut c) in running {
            match c.try_wait() {
                Ok(Some(st)) if st.success() => {}
                Ok(Some(st)) => {
                    failure.get_or_insert(CommError::RankFailed { rank: r, status: describe(st) });
                }
                Ok(None) => still.push((r, c)),
                Err(e) => {
                    failure.get_or_insert(io(format!("waiting for rank {r}"))(e));
                    still.push((r, c));
                }
            }
        }
        running = still;
        if failure.is_none() && spec.timeout.is_some_and(|t| start.elapsed() > t) {
            let ranks: Vec<u32> = running.iter().map(|(r, _)| *r).collect();
            failure = Some(CommError::RankFailed {
                rank: ranks[0],
                status: format!("still running after {:?} (ranks {ranks:?} killed)", spec.timeout.unwrap()),
            });
        }
        if !running.is_empty() && failure.is_none() {
            std::thread::sleep(Duration::from_millis(5));
        }
    }
    for (_, c) in running.iter_mut() {
        kill_group(c);
        let _ = c.wait();
    }
    for p in pumps {
        let _ = p.join();
    }
    failure.map_or(Ok(()), Err)
}

fn kill_group(c: &mut Child) {
    // SAFETY: signalling the process group this launcher created for the child.
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
