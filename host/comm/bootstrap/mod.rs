//! TCP bootstrap: rank 0 serves, every other rank connects. It moves small byte blobs (CUDA IPC
//! handles, queue-pair numbers) with `all_gather` and synchronises with `barrier`.
//!
//! Every step is bounded and every failure reaches every rank with its real cause:
//! - reads and writes on every socket time out (a peer alive but not reading cannot block a
//!   write), and a step waits at most `timeout`, then names the ranks that did not arrive;
//! - rank 0 accepts on a thread of its own for the group's whole life: a stranger on the port
//!   (bad magic, silence, garbage) is dropped without disturbing the join; a second process with
//!   a rank already taken (duplicate `RANK`, or a second rank 0 whose bind failed) fails the group;
//! - when rank 0 fails a step it sends every rank an ERROR frame with the reason, and a rank that
//!   gives up on its own sends rank 0 an ABORT frame that rank 0 relays, so the other ranks'
//!   errors name the cause instead of a reset connection;
//! - messages carried from peers and rank lists are bounded in length.
use super::error::{io, CommError, CommResult};
use super::world::World;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

pub mod frame;
use frame::{clip, decode_header, encode, pack, unpack, Frame, Kind, HEADER};

/// Longest peer message quoted inside an error.
const QUOTE: usize = 512;

/// Write one frame, all of it before `deadline` (each syscall's timeout is what is left, so a
/// peer that reads a trickle cannot stretch the bound).
fn write_frame_by(s: &mut TcpStream, deadline: Instant, kind: Kind, seq: u64, rank: u32, payload: &[u8]) -> IoResult {
    let buf = encode(kind, seq, rank, payload)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    let mut rest = &buf[..];
    while !rest.is_empty() {
        s.set_write_timeout(Some(left(deadline)?))?;
        match s.write(rest) {
            Ok(0) => return Err(std::io::ErrorKind::WriteZero.into()),
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timed_out(e)),
        }
    }
    Ok(())
}

type IoResult = std::io::Result<()>;

/// Write one frame within `timeout`.
fn write_frame(s: &mut TcpStream, timeout: Duration, kind: Kind, seq: u64, rank: u32, payload: &[u8]) -> IoResult {
    write_frame_by(s, Instant::now() + timeout, kind, seq, rank, payload)
}

/// Time left until `deadline`, or a timeout error.
fn left(deadline: Instant) -> std::io::Result<Duration> {
    let d = deadline.saturating_duration_since(Instant::now());
    if d.is_zero() {
        return Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out"));
    }
    Ok(d)
}

/// A socket timeout reads as one ("Resource temporarily unavailable" says nothing).
fn timed_out(e: std::io::Error) -> std::io::Error {
    match e.kind() {
        std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut => {
            std::io::Error::new(std::io::ErrorKind::TimedOut, "timed out")
        }
        _ => e,
    }
}

fn read_exact_by(s: &mut TcpStream, deadline: Option<Instant>, mut buf: &mut [u8]) -> IoResult {
    while !buf.is_empty() {
        s.set_read_timeout(deadline.map(left).transpose()?)?;
        match s.read(buf) {
            Ok(0) => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "connection closed")),
            Ok(n) => buf = &mut buf[n..],
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(timed_out(e)),
        }
    }
    Ok(())
}

/// Read one frame, all of it before `deadline` (None: no bound, for rank 0's reader threads).
fn read_frame(s: &mut TcpStream, deadline: Option<Instant>) -> std::io::Result<Frame> {
    let mut h = [0u8; HEADER];
    read_exact_by(s, deadline, &mut h)?;
    let h = decode_header(&h).map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e.to_string()))?;
    let mut payload = vec![0u8; h.len];
    read_exact_by(s, deadline, &mut payload)?;
    Ok(Frame { kind: h.kind, seq: h.seq, rank: h.rank, payload })
}

fn prepare(s: &TcpStream) -> CommResult<()> {
    s.set_nonblocking(false).map_err(io("set_nonblocking"))?;
    let _ = s.set_nodelay(true);
    Ok(())
}

/// `addr`'s first address, looked up on a helper thread so that a slow name service cannot hold
/// the join past `until` (the thread is left to finish on its own then); `None` when the name
/// has no address. The error says what failed.
fn resolve(addr: &str, until: Instant) -> Result<Option<std::net::SocketAddr>, String> {
    let (tx, rx) = std::sync::mpsc::channel();
    let name = addr.to_string();
    std::thread::Builder::new()
        .name("mkernel-bootstrap-resolve".into())
        .spawn(move || {
            let _ = tx.send(name.to_socket_addrs().map(|mut a| a.next()));
        })
        .map_err(|e| format!("starting the lookup of MASTER_ADDR {addr}: {e}"))?;
    match rx.recv_timeout(until.saturating_duration_since(Instant::now())) {
        Ok(Ok(a)) => Ok(a),
        Ok(Err(e)) => Err(format!("resolving MASTER_ADDR {addr}: {e}")),
        Err(_) => Err(format!("resolving MASTER_ADDR {addr} took longer than the bootstrap's timeout")),
    }
}

/// How long a rank waits for rank 0's answer: rank 0 may wait `timeout` for the others and then
/// spend up to `timeout` answering, and its error must still arrive.
fn answer_bound(timeout: Duration) -> Duration {
    2 * timeout + Duration::from_secs(1)
}

/// What rank 0's threads report to it.
enum Event {
    /// A process said HELLO during the join: its rank, its WORLD_SIZE, its connection.
    Hello(u32, u32, TcpStream),
    /// A process said HELLO after the join completed (it was told at once: its rank is taken).
    Late(u32),
    /// A frame (or the end of the connection) from a joined rank.
    Frame(u32, std::io::Result<Frame>),
}

/// Rank 0's acceptor: owns the listener until the group ends. After a failed join it stays a
/// while (the join's timeout) to give processes still arriving the reason instead of a closed
/// connection.
struct Acceptor {
    stop: Arc<AtomicBool>,
    joined: Arc<AtomicBool>,
    strangers: Arc<AtomicU64>,
    /// Why the group failed, and until when the acceptor keeps telling newcomers.
    failed: Arc<Mutex<Option<(String, Instant)>>>,
    /// The last error of `accept` other than "nothing pending" (e.g. out of file descriptors),
    /// or of starting a connection's handshake: said when the join fails.
    trouble: Arc<Mutex<Option<String>>>,
    timeout: Duration,
    /// The accepting thread: joined on drop (after a clean group), so the listener is closed
    /// and the port free for the next group when the bootstrap is gone.
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Acceptor {
    fn start(listener: TcpListener, world: u32, timeout: Duration, tx: Sender<Event>) -> CommResult<Acceptor> {
        listener.set_nonblocking(true).map_err(io("set_nonblocking"))?;
        let mut a = Acceptor {
            stop: Default::default(),
            joined: Default::default(),
            strangers: Default::default(),
            failed: Default::default(),
            trouble: Default::default(),
            timeout,
            thread: None,
        };
        let shared = (a.joined.clone(), a.strangers.clone(), a.failed.clone());
        let (stop, trouble) = (a.stop.clone(), a.trouble.clone());
        let accept = move || loop {
            let lingered = lock(&shared.2).as_ref().is_some_and(|(_, until)| Instant::now() > *until);
            if stop.load(Ordering::Acquire) || lingered {
                return;
            }
            match listener.accept() {
                Ok((s, _)) => {
                    let (tx, shared) = (tx.clone(), shared.clone());
                    // A handshake per connection: a silent stranger cannot hold up the others.
                    let spawned = std::thread::Builder::new()
                        .name("mkernel-bootstrap-hello".into())
                        .spawn(move || handshake(s, world, timeout, &tx, &shared.0, &shared.1, &shared.2));
                    if let Err(e) = spawned {
                        *lock(&trouble) = Some(format!("starting a connection's handshake: {e}"));
                    }
                }
                Err(e) => {
                    if e.kind() != std::io::ErrorKind::WouldBlock {
                        *lock(&trouble) = Some(format!("accept: {e}"));
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
            }
        };
        a.thread = Some(
            std::thread::Builder::new()
                .name("mkernel-bootstrap-accept".into())
                .spawn(accept)
                .map_err(io("rank 0: starting the acceptor"))?,
        );
        Ok(a)
    }

    fn strangers_note(&self) -> String {
        let mut note = match self.strangers.load(Ordering::Relaxed) {
            0 => String::new(),
            n => format!(" ({n} connection(s) from other programs on the port were dropped)"),
        };
        if let Some(t) = lock(&self.trouble).as_ref() {
            note.push_str(&format!(" (rank 0's listener failed meanwhile: {t})"));
        }
        note
    }

    /// The group failed with `err`: tell the processes whose HELLO is queued, and from now on
    /// every newcomer, for a while.
    fn fail(&self, err: &CommError, rx: &Receiver<Event>) {
        let msg = err.to_string();
        *lock(&self.failed) = Some((msg.clone(), Instant::now() + self.timeout));
        while let Ok(ev) = rx.try_recv() {
            if let Event::Hello(_, _, mut s) = ev {
                let _ = write_frame(&mut s, Duration::from_millis(500), Kind::Error, 0, 0, msg.as_bytes());
            }
        }
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        // After a failed join the thread lingers to tell newcomers (it ends by itself).
        if lock(&self.failed).is_none() {
            self.stop.store(true, Ordering::Release);
            // It polls `stop` every 2 ms (the listener does not block): a bounded wait.
            if let Some(t) = self.thread.take() {
                let _ = t.join();
            }
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Read one HELLO from a new connection; forward it, answer it, or drop the stranger.
fn handshake(
    mut s: TcpStream,
    world: u32,
    timeout: Duration,
    tx: &Sender<Event>,
    joined: &AtomicBool,
    strangers: &AtomicU64,
    failed: &Mutex<Option<(String, Instant)>>,
) {
    let hello = prepare(&s).ok().and_then(|_| read_frame(&mut s, Some(Instant::now() + timeout)).ok());
    let Some(f) = hello.filter(|f| f.kind == Kind::Hello && f.payload.len() == 4) else {
        strangers.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let their_world = u32::from_le_bytes([f.payload[0], f.payload[1], f.payload[2], f.payload[3]]);
    // Held while forwarding, so a HELLO is either queued before a failure (and answered by
    // Acceptor::fail) or sees it here.
    let failed = lock(failed);
    if let Some((why, _)) = &*failed {
        let _ = write_frame(&mut s, timeout, Kind::Error, 0, 0, why.as_bytes());
    } else if joined.load(Ordering::Acquire) {
        let what = format!(
            "bootstrap on rank 0: a process with RANK={} (WORLD_SIZE {their_world}) tried to join after all {world} \
             ranks had joined (duplicate RANK?)",
            f.rank
        );
        // Rank 0 learns first, so the group's next step fails even if it starts at once.
        let _ = tx.send(Event::Late(f.rank));
        let _ = write_frame(&mut s, timeout, Kind::Error, 0, 0, what.as_bytes());
    } else {
        let _ = tx.send(Event::Hello(f.rank, their_world, s));
    }
}

enum Role {
    Root { peers: Vec<Option<TcpStream>>, rx: Receiver<Event>, acceptor: Option<Acceptor> },
    Leaf { stream: TcpStream },
}

/// A connected bootstrap group.
pub struct Bootstrap {
    rank: u32,
    world: u32,
    timeout: Duration,
    seq: u64,
    role: Role,
}

/// Tell every connected rank why the group failed, then return the error.
fn abort_all<T>(peers: &mut [Option<TcpStream>], seq: u64, err: CommError) -> CommResult<T> {
    let msg = err.to_string();
    // A short bound each: a peer that does not read must not delay telling the others.
    for s in peers.iter_mut().flatten() {
        let _ = write_frame(s, Duration::from_millis(500), Kind::Error, seq, 0, msg.as_bytes());
    }
    Err(err)
}

/// How long rank 0 tries again to listen on a port in use before it reports the port served.
const BIND_RETRY: Duration = Duration::from_millis(300);

fn root_err(what: String) -> CommError {
    CommError::Bootstrap { rank: 0, what }
}

impl Bootstrap {
    /// Join the group described by `w`; every rank must call it within `timeout` of each other.
    pub fn connect(w: &World, timeout: Duration) -> CommResult<Bootstrap> {
        if timeout.is_zero() {
            return Err(CommError::InvalidArgument { arg: "timeout", rule: "0 s must be at least 1 ms".into() });
        }
        let role = if w.world_size == 1 {
            Role::Root { peers: vec![None], rx: channel().1, acceptor: None }
        } else if w.rank == 0 {
            Self::serve(w, timeout)?
        } else {
            Self::join(w, timeout)?
        };
        Ok(Bootstrap { rank: w.rank, world: w.world_size, timeout, seq: 0, role })
    }

    fn serve(w: &World, timeout: Duration) -> CommResult<Role> {
        let addr = format!("{}:{}", w.master_addr, w.master_port);
        // A port busy for a moment (the last group's listener still held by a child this process
        // was forking) is tried again for a while before it counts as served by someone else.
        let busy_until = Instant::now() + timeout.min(BIND_RETRY);
        let listener = loop {
            match TcpListener::bind(&addr) {
                Ok(l) => break l,
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse && Instant::now() < busy_until => {
                    std::thread::sleep(Duration::from_millis(10))
                }
                Err(e) if e.kind() == std::io::ErrorKind::AddrInUse => return Err(Self::port_taken(w, timeout, &addr)),
                Err(e) => return Err(io(format!("rank 0: listening on {addr}"))(e)),
            }
        };
        let (tx, rx) = channel();
        let acceptor = Acceptor::start(listener, w.world_size, timeout, tx.clone())?;
        let start = Instant::now();
        let mut peers: Vec<Option<TcpStream>> = (0..w.world_size).map(|_| None).collect();
        let mut joined = 1;
        while joined < w.world_size {
            let left = timeout.saturating_sub(start.elapsed());
            match rx.recv_timeout(left) {
                Ok(Event::Hello(r, their_world, mut s)) => {
                    let rule = if their_world != w.world_size {
                        Some(format!(
                            "a process with RANK={r} has WORLD_SIZE={their_world}, rank 0 has {}",
                            w.world_size
                        ))
                    } else if r == 0 {
                        Some("two processes have RANK=0 (the second could not serve the port)".into())
                    } else if r >= w.world_size {
                        Some(format!("a process has RANK={r}, outside 0..{}", w.world_size))
                    } else if peers[r as usize].is_some() {
                        Some(format!("two processes have RANK={r}"))
                    } else {
                        None
                    };
                    if let Some(rule) = rule {
                        let err = root_err(format!("join failed: {rule}"));
                        let _ = write_frame(&mut s, timeout, Kind::Error, 0, 0, err.to_string().as_bytes());
                        acceptor.fail(&err, &rx);
                        return abort_all(&mut peers, 0, err);
                    }
                    peers[r as usize] = Some(s);
                    joined += 1;
                }
                Ok(Event::Late(_) | Event::Frame(..)) => {}
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let missing: Vec<u32> = (1..w.world_size).filter(|&r| peers[r as usize].is_none()).collect();
                    let err = CommError::Missing {
                        op: format!("join{}", acceptor.strangers_note()),
                        rank: 0,
                        missing,
                        waited_ms: start.elapsed().as_millis() as u64,
                    };
                    acceptor.fail(&err, &rx);
                    return abort_all(&mut peers, 0, err);
                }
            }
        }
        acceptor.joined.store(true, Ordering::Release);
        // Acknowledge everyone; a rank gone since its HELLO fails the join for all.
        let deadline = Instant::now() + timeout;
        for r in 1..w.world_size as usize {
            let s = peers[r].as_mut().expect("every rank joined");
            if let Err(e) = write_frame_by(s, deadline, Kind::Result, 0, 0, &[]) {
                peers[r] = None;
                let err = root_err(format!("rank {r} left during the join: {e}"));
                acceptor.fail(&err, &rx);
                return abort_all(&mut peers, 0, err);
            }
        }
        // One reader thread per peer feeds the channel, so a step can wait on all of them with one
        // deadline and name exactly who is missing.
        for (r, s) in peers.iter_mut().enumerate() {
            if let Some(s) = s {
                let mut reader = s.try_clone().map_err(io("try_clone"))?;
                let tx = tx.clone();
                let read = move || loop {
                    let f = read_frame(&mut reader, None);
                    let stop = f.is_err();
                    if tx.send(Event::Frame(r as u32, f)).is_err() || stop {
                        return;
                    }
                };
                std::thread::Builder::new()
                    .name(format!("mkernel-bootstrap-rank-{r}"))
                    .spawn(read)
                    .map_err(io("rank 0: starting a reader"))?;
            }
        }
        Ok(Role::Root { peers, rx, acceptor: Some(acceptor) })
    }

    /// A second process with RANK=0 found the port taken: tell the serving rank 0 (so the whole
    /// group fails with the cause) and fail with it.
    fn port_taken(w: &World, timeout: Duration, addr: &str) -> CommError {
        let told = addr.to_socket_addrs().ok().and_then(|mut a| a.next()).and_then(|a| {
            let mut s = TcpStream::connect_timeout(&a, timeout.min(Duration::from_secs(1))).ok()?;
            prepare(&s).ok()?;
            write_frame(&mut s, timeout, Kind::Hello, 0, 0, &w.world_size.to_le_bytes()).ok()
        });
        let what = format!(
            "MASTER_PORT {} at {addr} is already served: another process has RANK=0 (duplicate RANK?) or another \
             program holds the port{}",
            w.master_port,
            if told.is_some() { "; told the process serving it" } else { "" }
        );
        CommError::Bootstrap { rank: 0, what }
    }

    fn join(w: &World, timeout: Duration) -> CommResult<Role> {
        let addr = format!("{}:{}", w.master_addr, w.master_port);
        let start = Instant::now();
        // Resolved once (a name lookup can be slow), within the join's bound.
        let target = resolve(&addr, start + timeout).map_err(|what| CommError::Bootstrap { rank: w.rank, what })?;
        let mut stream = loop {
            let attempt = target.map(|a| TcpStream::connect_timeout(&a, Duration::from_millis(200)));
            match attempt {
                Some(Ok(s)) => break s,
                _ if start.elapsed() > timeout => {
                    let what = format!("rank 0 did not accept connections at {addr} within {} ms", timeout.as_millis());
                    return Err(CommError::Bootstrap { rank: w.rank, what });
                }
                _ => std::thread::sleep(Duration::from_millis(20)),
            }
        };
        prepare(&stream)?;
        let fail = |what: String| CommError::Bootstrap { rank: w.rank, what };
        write_frame(&mut stream, timeout, Kind::Hello, 0, w.rank, &w.world_size.to_le_bytes())
            .map_err(|e| fail(format!("sending HELLO to rank 0 at {addr}: {e}")))?;
        // Rank 0 answers within its bounds: an ack, or the reason the join failed.
        let f = read_frame(&mut stream, Some(Instant::now() + answer_bound(timeout)))
            .map_err(|e| fail(format!("waiting for rank 0 to acknowledge the join: {e}")))?;
        match f.kind {
            Kind::Result => Ok(Role::Leaf { stream }),
            Kind::Error => Err(fail(format!("rank 0 reported: {}", clip(&String::from_utf8_lossy(&f.payload), QUOTE)))),
            k => Err(fail(format!("unexpected frame {k:?} during join"))),
        }
    }

    /// This rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Number of ranks.
    pub fn world_size(&self) -> u32 {
        self.world
    }

    /// Every rank contributes `data` (at most [`frame::MAX_PAYLOAD`] bytes); every rank gets all
    /// contributions, indexed by rank.
    pub fn all_gather(&mut self, data: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        self.seq += 1;
        let (seq, rank, timeout, world) = (self.seq, self.rank, self.timeout, self.world);
        match &mut self.role {
            Role::Leaf { stream } => Self::leaf_gather(stream, rank, world, seq, timeout, data),
            Role::Root { peers, rx, acceptor } => {
                let note = acceptor.as_ref().map(Acceptor::strangers_note).unwrap_or_default();
                Self::root_gather(peers, rx, world, seq, timeout, data, &note)
            }
        }
    }

    fn leaf_gather(
        stream: &mut TcpStream,
        rank: u32,
        world: u32,
        seq: u64,
        timeout: Duration,
        data: &[u8],
    ) -> CommResult<Vec<Vec<u8>>> {
        let fail = |what: String| CommError::Bootstrap { rank, what };
        // Giving up on our own: tell rank 0, which tells everyone.
        let abort = |stream: &mut TcpStream, err: CommError| {
            let _ = write_frame(stream, timeout, Kind::Abort, seq, rank, err.to_string().as_bytes());
            Err(err)
        };
        if data.len() > frame::MAX_PAYLOAD {
            let rule = format!("{} bytes exceed the bootstrap's {}-byte limit", data.len(), frame::MAX_PAYLOAD);
            return abort(stream, CommError::InvalidArgument { arg: "data", rule });
        }
        write_frame(stream, timeout, Kind::Gather, seq, rank, data)
            .map_err(|e| fail(format!("sending all_gather #{seq} to rank 0: {e}")))?;
        let f = read_frame(stream, Some(Instant::now() + answer_bound(timeout)))
            .map_err(|e| fail(format!("rank 0 did not answer all_gather #{seq}: {e}")))?;
        match f.kind {
            Kind::Result if f.seq == seq => match unpack(&f.payload, world as usize) {
                Some(all) => Ok(all),
                None => abort(stream, fail(format!("malformed all_gather #{seq} result from rank 0"))),
            },
            Kind::Error => Err(fail(format!("rank 0 reported: {}", clip(&String::from_utf8_lossy(&f.payload), QUOTE)))),
            k => abort(stream, fail(format!("unexpected frame {k:?} seq {} in all_gather #{seq}", f.seq))),
        }
    }

    fn root_gather(
        peers: &mut [Option<TcpStream>],
        rx: &Receiver<Event>,
        world: u32,
        seq: u64,
        timeout: Duration,
        data: &[u8],
        note: &str,
    ) -> CommResult<Vec<Vec<u8>>> {
        let mut got: Vec<Option<Vec<u8>>> = (0..world).map(|_| None).collect();
        got[0] = Some(data.to_vec());
        let start = Instant::now();
        let mut failure: Option<String> = None;
        while failure.is_none() && got.iter().any(Option::is_none) {
            let left = timeout.saturating_sub(start.elapsed());
            match rx.recv_timeout(left) {
                Ok(Event::Frame(r, Ok(f))) if f.kind == Kind::Gather && f.seq == seq && f.rank == r => {
                    got[r as usize] = Some(f.payload)
                }
                Ok(Event::Frame(r, Ok(f))) if f.kind == Kind::Abort => {
                    let why = clip(&String::from_utf8_lossy(&f.payload), QUOTE);
                    failure = Some(format!("rank {r} gave up during all_gather #{seq}: {why}"));
                }
                Ok(Event::Frame(r, Ok(f))) => {
                    failure = Some(format!(
                        "rank {r} sent frame {:?} seq {} during all_gather #{seq} (mismatched calls?)",
                        f.kind, f.seq
                    ))
                }
                Ok(Event::Frame(r, Err(e))) => {
                    peers[r as usize] = None;
                    failure = Some(format!("rank {r} disconnected during all_gather #{seq}: {e}"));
                }
                Ok(Event::Late(r)) => {
                    failure = Some(format!("a second process with RANK={r} tried to join (duplicate RANK?)"))
                }
                Ok(Event::Hello(r, _, _)) => failure = Some(format!("a second process with RANK={r} said HELLO")),
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => {
                    let missing = (0..world).filter(|&r| got[r as usize].is_none()).collect();
                    let err = CommError::Missing {
                        op: format!("all_gather #{seq}{note}"),
                        rank: 0,
                        missing,
                        waited_ms: start.elapsed().as_millis() as u64,
                    };
                    return abort_all(peers, seq, err);
                }
            }
        }
        if let Some(what) = failure {
            return abort_all(peers, seq, root_err(what));
        }
        let all: Vec<Vec<u8>> = got.into_iter().map(Option::unwrap_or_default).collect();
        let packed = pack(&all);
        if packed.len() > frame::MAX_PAYLOAD {
            let what = format!(
                "all_gather #{seq}: the {} ranks' {} bytes exceed the bootstrap's {}-byte limit",
                world,
                packed.len(),
                frame::MAX_PAYLOAD
            );
            return abort_all(peers, seq, root_err(what));
        }
        // One deadline for all answers, so that ranks waiting for us hear in time (answer_bound).
        let deadline = Instant::now() + timeout;
        for r in 1..peers.len() {
            let Some(s) = peers[r].as_mut() else { continue };
            if let Err(e) = write_frame_by(s, deadline, Kind::Result, seq, 0, &packed) {
                peers[r] = None;
                let what = format!("answering rank {r} in all_gather #{seq}: {e} (rank {r} alive but not reading?)");
                return abort_all(peers, seq, root_err(what));
            }
        }
        Ok(all)
    }

    /// Wait until every rank reached the barrier (bounded like every step).
    pub fn barrier(&mut self) -> CommResult<()> {
        self.all_gather(&[]).map(|_| ())
    }

    /// This rank gives up on the group between steps (its own setup failed with `why`), so that
    /// the others hear the cause instead of "disconnected": rank 0 tells every rank now; another
    /// rank tells rank 0, whose pending or next step tells the rest. Best effort (a short bound
    /// on each write); the group cannot take another step after it.
    pub fn abort(&mut self, why: &str) {
        let (seq, rank) = (self.seq + 1, self.rank);
        let what = format!("rank {rank} gave up: {}", clip(why, QUOTE));
        match &mut self.role {
            Role::Leaf { stream } => {
                let _ = write_frame(stream, Duration::from_millis(500), Kind::Abort, seq, rank, what.as_bytes());
            }
            Role::Root { peers, .. } => {
                let _: CommResult<()> = abort_all(peers, seq, root_err(what));
            }
        }
    }
}

impl Drop for Bootstrap {
    fn drop(&mut self) {
        match &mut self.role {
            Role::Leaf { stream } => {
                let _ = stream.shutdown(Shutdown::Both);
            }
            Role::Root { peers, .. } => {
                for s in peers.iter_mut().flatten() {
                    let _ = s.shutdown(Shutdown::Both);
                }
            }
        }
    }
}
