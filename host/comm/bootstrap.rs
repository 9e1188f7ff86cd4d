//! TCP bootstrap: rank 0 serves, every other rank connects. It moves small byte blobs (CUDA IPC
//! handles, queue-pair numbers) with `all_gather` and synchronises with `barrier`. Every step is
//! bounded: on timeout each rank gets an error naming the ranks that did not arrive (rank 0
//! tells the others before giving up), so a rank that dies or never joins cannot hang the rest.
use super::error::{io, CommError, CommResult};
use super::world::World;
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::mpsc::{channel, Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

const MAGIC: u32 = 0x4d4b_4253; // "MKBS"
const HELLO: u32 = 1;
const GATHER: u32 = 2;
const RESULT: u32 = 3;
const ERROR: u32 = 4;
const MAX_PAYLOAD: usize = 64 << 20;

struct Frame {
    kind: u32,
    seq: u64,
    rank: u32,
    payload: Vec<u8>,
}

fn write_frame(s: &mut TcpStream, kind: u32, seq: u64, rank: u32, payload: &[u8]) -> std::io::Result<()> {
    let mut buf = Vec::with_capacity(24 + payload.len());
    buf.extend_from_slice(&MAGIC.to_le_bytes());
    buf.extend_from_slice(&kind.to_le_bytes());
    buf.extend_from_slice(&seq.to_le_bytes());
    buf.extend_from_slice(&rank.to_le_bytes());
    buf.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    buf.extend_from_slice(payload);
    s.write_all(&buf)
}

fn read_frame(s: &mut TcpStream) -> std::io::Result<Frame> {
    let mut h = [0u8; 24];
    s.read_exact(&mut h)?;
    let word = |i: usize| u32::from_le_bytes(h[i..i + 4].try_into().unwrap());
    if word(0) != MAGIC {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            "bad bootstrap frame (another program on this port?)",
        ));
    }
    let len = word(20) as usize;
    if len > MAX_PAYLOAD {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("frame of {len} bytes exceeds {MAX_PAYLOAD}"),
        ));
    }
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload)?;
    Ok(Frame { kind: word(4), seq: u64::from_le_bytes(h[8..16].try_into().unwrap()), rank: word(16), payload })
}

fn pack(blobs: &[Vec<u8>]) -> Vec<u8> {
    let mut out = Vec::new();
    for b in blobs {
        out.extend_from_slice(&(b.len() as u32).to_le_bytes());
        out.extend_from_slice(b);
    }
    out
}

fn unpack(mut data: &[u8], n: usize) -> Option<Vec<Vec<u8>>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let len = u32::from_le_bytes(data.get(..4)?.try_into().ok()?) as usize;
        out.push(data.get(4..4 + len)?.to_vec());
        data = &data[4 + len..];
    }
    data.is_empty().then_some(out)
}

enum Role {
    Root { peers: Vec<Option<TcpStream>>, rx: Receiver<(u32, std::io::Result<Frame>)> },
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

impl Bootstrap {
    /// Join the group described by `w`; every rank must call it within `timeout` of each other.
    pub fn connect(w: &World, timeout: Duration) -> CommResult<Bootstrap> {
        let role = if w.world_size == 1 {
            Role::Root { peers: vec![None], rx: channel().1 }
        } else if w.rank == 0 {
            Self::serve(w, timeout)?
        } else {
            Self::join(w, timeout)?
        };
        Ok(Bootstrap { rank: w.rank, world: w.world_size, timeout, seq: 0, role })
    }

    fn serve(w: &World, timeout: Duration) -> CommResult<Role> {
        let addr = format!("{}:{}", w.master_addr, w.master_port);
        let listener = TcpListener::bind(&addr).map_err(io(format!("rank 0: listening on {addr}")))?;
        listener.set_nonblocking(true).map_err(io("set_nonblocking"))?;
        let start = Instant::now();
        let mut peers: Vec<Option<TcpStream>> = (0..w.world_size).map(|_| None).collect();
        let mut joined = 1;
        while joined < w.world_size {
            match listener.accept() {
                Ok((mut s, _)) => {
                    s.set_nonblocking(false).map_err(io("set_nonblocking"))?;
                    s.set_read_timeout(Some(timeout)).map_err(io("set_read_timeout"))?;
                    let _ = s.set_nodelay(true);
                    let f = read_frame(&mut s).map_err(io("rank 0: reading a HELLO"))?;
                    let their_world =
                        u32::from_le_bytes(f.payload.get(..4).and_then(|b| b.try_into().ok()).unwrap_or([0; 4]));
                    if f.kind != HELLO || f.rank == 0 || f.rank >= w.world_size || their_world != w.world_size {
                        let what = format!(
                            "unexpected HELLO from rank {} (world {their_world}; ours is {})",
                            f.rank, w.world_size
                        );
                        return Err(CommError::Bootstrap { rank: 0, what });
                    }
                    if peers[f.rank as usize].replace(s).is_some() {
                        return Err(CommError::Bootstrap { rank: 0, what: format!("rank {} joined twice", f.rank) });
                    }
                    joined += 1;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                    if start.elapsed() > timeout {
                        let missing: Vec<u32> = (1..w.world_size).filter(|&r| peers[r as usize].is_none()).collect();
                        let err = CommError::Missing {
                            op: "join".into(),
                            rank: 0,
                            missing,
                            waited_ms: timeout.as_millis() as u64,
                        };
                        for s in peers.iter_mut().flatten() {
                            let _ = write_frame(s, ERROR, 0, 0, err.to_string().as_bytes());
                        }
                        return Err(err);
                    }
                    std::thread::sleep(Duration::from_millis(2));
                }
                Err(e) => return Err(io("rank 0: accept")(e)),
            }
        }
        // One reader thread per peer feeds a channel, so a gather can wait on all of them with one
        // deadline and name exactly who is missing.
        let (tx, rx) = channel();
        for (r, s) in peers.iter_mut().enumerate() {
            if let Some(s) = s {
                write_frame(s, RESULT, 0, 0, &[]).map_err(io(format!("rank 0: acknowledging rank {r}")))?;
                s.set_read_timeout(None).map_err(io("set_read_timeout"))?;
                let mut reader = s.try_clone().map_err(io("try_clone"))?;
                let tx = tx.clone();
                std::thread::spawn(move || loop {
                    let f = read_frame(&mut reader);
                    let stop = f.is_err();
                    if tx.send((r as u32, f)).is_err() || stop {
                        return;
                    }
                });
            }
        }
        Ok(Role::Root { peers, rx })
    }

    fn join(w: &World, timeout: Duration) -> CommResult<Role> {
        let addr = format!("{}:{}", w.master_addr, w.master_port);
        let start = Instant::now();
        let mut stream = loop {
            let target = addr.to_socket_addrs().map_err(io(format!("resolving MASTER_ADDR {addr}")))?.next();
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
        let _ = stream.set_nodelay(true);
        write_frame(&mut stream, HELLO, 0, w.rank, &w.world_size.to_le_bytes()).map_err(io("sending HELLO"))?;
        stream.set_read_timeout(Some(timeout + Duration::from_secs(1))).map_err(io("set_read_timeout"))?;
        let f = read_frame(&mut stream).map_err(|e| CommError::Bootstrap {
            rank: w.rank,
            what: format!("waiting for rank 0 to acknowledge the join: {e}"),
        })?;
        match f.kind {
            RESULT => Ok(Role::Leaf { stream }),
            ERROR => Err(CommError::Bootstrap {
                rank: w.rank,
                what: format!("rank 0 reported: {}", String::from_utf8_lossy(&f.payload)),
            }),
            k => Err(CommError::Bootstrap { rank: w.rank, what: format!("unexpected frame kind {k} during join") }),
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

    /// Every rank contributes `data`; every rank gets all contributions, indexed by rank.
    pub fn all_gather(&mut self, data: &[u8]) -> CommResult<Vec<Vec<u8>>> {
        self.seq += 1;
        let (seq, rank, timeout, world) = (self.seq, self.rank, self.timeout, self.world);
        match &mut self.role {
            Role::Leaf { stream } => {
                write_frame(stream, GATHER, seq, rank, data)
                    .map_err(io(format!("rank {rank}: sending all_gather #{seq}")))?;
                stream.set_read_timeout(Some(timeout + Duration::from_secs(1))).map_err(io("set_read_timeout"))?;
                let f = read_frame(stream).map_err(|e| CommError::Bootstrap {
                    rank,
                    what: format!("rank 0 did not answer all_gather #{seq}: {e}"),
                })?;
                match f.kind {
                    RESULT if f.seq == seq => unpack(&f.payload, world as usize)
                        .ok_or(CommError::Bootstrap { rank, what: "malformed all_gather result".into() }),
                    ERROR => Err(CommError::Bootstrap {
                        rank,
                        what: format!("rank 0 reported: {}", String::from_utf8_lossy(&f.payload)),
                    }),
                    k => Err(CommError::Bootstrap {
                        rank,
                        what: format!("unexpected frame kind {k} seq {} in all_gather #{seq}", f.seq),
                    }),
                }
            }
            Role::Root { peers, rx } => {
                let mut got: Vec<Option<Vec<u8>>> = (0..world).map(|_| None).collect();
                got[0] = Some(data.to_vec());
                let start = Instant::now();
                let mut failure: Option<CommError> = None;
                while failure.is_none() && got.iter().any(Option::is_none) {
                    let left = timeout.saturating_sub(start.elapsed());
                    match rx.recv_timeout(left) {
                        Ok((r, Ok(f))) if f.kind == GATHER && f.seq == seq && f.rank == r => {
                            got[r as usize] = Some(f.payload)
                        }
                        Ok((r, Ok(f))) => {
                            failure = Some(CommError::Bootstrap {
                                rank: 0,
                                what: format!(
                                    "rank {r} sent frame kind {} seq {} during all_gather #{seq} (mismatched calls?)",
                                    f.kind, f.seq
                                ),
                            })
                        }
                        Ok((r, Err(e))) => {
                            failure = Some(CommError::Bootstrap {
                                rank: 0,
                                what: format!("rank {r} disconnected during all_gather #{seq}: {e}"),
                            })
                        }
                        Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => {
                            let missing = (0..world).filter(|&r| got[r as usize].is_none()).collect();
                            failure = Some(CommError::Missing {
                                op: format!("all_gather #{seq}"),
                                rank: 0,
                                missing,
                                waited_ms: start.elapsed().as_millis() as u64,
                            });
                        }
                    }
                }
                if let Some(err) = failure {
                    for s in peers.iter_mut().flatten() {
                        let _ = write_frame(s, ERROR, seq, 0, err.to_string().as_bytes());
                    }
                    return Err(err);
                }
                let all: Vec<Vec<u8>> = got.into_iter().map(Option::unwrap).collect();
                let packed = pack(&all);
                for (r, s) in peers.iter_mut().enumerate() {
                    if let Some(s) = s {
                        write_frame(s, RESULT, seq, 0, &packed).map_err(io(format!("rank 0: answering rank {r}")))?;
                    }
                }
                Ok(all)
            }
        }
    }

    /// Wait until every rank reached the barrier (bounded like every step).
    pub fn barrier(&mut self) -> CommResult<()> {
        self.all_gather(&[]).map(|_| ())
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
