//! Transports carry out FIFO commands. `post` gets commands in FIFO order and must keep, per
//! destination rank (one queue pair), data before the flag written after it.
//!
//! - [`FnTransport`]: a closure per command (tests, loopback signalling).
//! - [`EmulatedNic`]: the proxy performs the writes with CUDA copies into peers' memory mapped
//!   through CUDA IPC (ranks of emulated nodes on one host; through pinned host memory between
//!   ranks sharing a GPU, see [`EmulatedNic`]), in posting order, and models a NIC's
//!   bandwidth and latency: a flag becomes visible only when the modelled NIC would have delivered
//!   the data before it.
//! - [`verbs`]: RDMA over InfiniBand/RoCE (see that module for what has run).
use super::error::{CommError, CommResult};
use crate::abi::{FifoCmd, OP_FENCE, OP_SIGNAL, OP_WRITE};
use cust::event::{Event, EventFlags, EventStatus};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

pub mod verbs;

/// Something that executes FIFO commands.
pub trait Transport: Send {
    /// Short name for errors and logs.
    fn name(&self) -> &'static str;
    /// Called once on the proxy thread before the first command (bind a CUDA context, ...).
    fn on_proxy_thread(&mut self) -> CommResult<()> {
        Ok(())
    }
    /// Start these commands, in order.
    fn post(&mut self, cmds: &[FifoCmd]) -> CommResult<()>;
    /// Make progress on started work (completions, deferred flags); called when the FIFO is idle.
    fn progress(&mut self) -> CommResult<()> {
        Ok(())
    }
    /// Complete everything started.
    fn flush(&mut self) -> CommResult<()>;
    /// How many of the commands posted so far, the latest ones, may still read their sources
    /// (the rest have: a WRITE's bytes were copied out or landed). The proxy publishes the
    /// released position from it; a transport that finishes reading in `post` says 0. No
    /// default: a transport that reads later and forgot to say so would free sources early.
    fn unreleased(&mut self) -> CommResult<u64>;
}

/// A transport that runs a closure on every command.
pub struct FnTransport<F: FnMut(&FifoCmd) -> CommResult<()> + Send>(pub F);

impl<F: FnMut(&FifoCmd) -> CommResult<()> + Send> Transport for FnTransport<F> {
    fn name(&self) -> &'static str {
        "fn"
    }
    fn post(&mut self, cmds: &[FifoCmd]) -> CommResult<()> {
        cmds.iter().try_for_each(&mut self.0)
    }
    fn flush(&mut self) -> CommResult<()> {
        Ok(())
    }
    fn unreleased(&mut self) -> CommResult<u64> {
        Ok(0) // the closure ran on every command in `post`
    }
}

/// A NIC's timing: one serial wire of `bandwidth` bytes/s plus a fixed `latency` per message.
#[derive(Clone, Debug)]
pub struct NicModel {
    bytes_per_s: f64,
    latency: Duration,
    busy_until: Option<Instant>,
}

impl NicModel {
    /// Default: one 400 Gb/s ConnectX-7 (50 GB/s), 2 us.
    pub fn cx7() -> Self {
        Self::new(50e9, Duration::from_micros(2))
    }

    /// A NIC moving `bytes_per_s` bytes per second, each message arriving `latency` after its
    /// last byte left.
    pub fn new(bytes_per_s: f64, latency: Duration) -> Self {
        Self { bytes_per_s, latency, busy_until: None }
    }

    /// Modelled time to deliver `bytes` back to back: the wire time plus one latency.
    pub fn transfer_time(&self, bytes: u64) -> Duration {
        Duration::from_secs_f64(bytes as f64 / self.bytes_per_s) + self.latency
    }

    /// When a message of `bytes` handed to the NIC at `now` is delivered (wire is serial).
    pub fn deliver(&mut self, now: Instant, bytes: u64) -> Instant {
        let start = self.busy_until.map_or(now, |b| b.max(now));
        let end = start + Duration::from_secs_f64(bytes as f64 / self.bytes_per_s);
        self.busy_until = Some(end);
        end + self.latency
    }
}

/// Address tables of an emulated NIC: where each registered buffer lives.
#[derive(Clone, Debug, Default)]
pub struct Regions {
    /// Local buffers by id: (device address, bytes).
    pub local: Vec<(u64, u64)>,
    /// Remote buffers: `remote[rank][id]` = (device address mapped here, bytes).
    pub remote: Vec<Vec<(u64, u64)>>,
}

impl Regions {
    /// Device address of `bytes` at packed location `loc` in a local buffer (`rank` None) or one
    /// of `rank`'s. The range must lie inside the registered buffer; the end is computed with
    /// checked arithmetic, so a huge length is an error in debug and release builds alike.
    pub fn resolve(&self, loc: u64, rank: Option<u32>, bytes: u64) -> CommResult<u64> {
        let (id, off) = FifoCmd::split(loc);
        let who = rank.map_or("local".to_string(), |r| format!("rank {r}'s"));
        let table = match rank {
            None => &self.local,
            Some(r) => self.remote.get(r as usize).ok_or_else(|| bad(format!("no buffers registered for rank {r}")))?,
        };
        let (base, len) = *table.get(id as usize).ok_or_else(|| bad(format!("{who} buffer id {id} not registered")))?;
        if base == 0 {
            return Err(bad(format!("{who} buffer {id} is not mapped here")));
        }
        match off.checked_add(bytes) {
            Some(end) if end <= len => {
                base.checked_add(off).ok_or_else(|| bad(format!("{who} buffer {id}: address {base:#x} + {off} wraps")))
            }
            _ => Err(bad(format!("{who} buffer {id}: {bytes} bytes at offset {off} run past its {len} bytes"))),
        }
    }
}

fn bad(what: String) -> CommError {
    CommError::Transport { transport: "emulated-nic", what }
}

/// Size of the pinned buffer that carries writes between ranks sharing a GPU.
const BOUNCE_BYTES: usize = 8 << 20;

struct Deferred {
    at: Instant,
    addr: u64,
    value: u32,
}

/// The emulated NIC (see the module docs).
///
/// One CUDA stream carries every copy and flag write, in posting order: per destination, data
/// before the flag after it, as a queue pair would (the model's wire is serial too). A flag is a
/// stream memory operation (`gpu::write_u32_async`), not a memset kernel. With one stream per
/// destination and memsets, 16 ranks sharing one H200 hung: beyond `CUDA_DEVICE_MAX_CONNECTIONS`
/// (8 hardware queues) some destination's stream shared the queue of the stream running the
/// persistent kernel, and its flags waited behind that kernel, which waited for them.
///
/// Between two ranks that share one GPU (emulated nodes on fewer GPUs than ranks), a device to
/// device copy is the driver's copy kernel, which needs an SM: while a persistent kernel holds
/// every SM (a fused MoE launch does) it cannot start, and the flags queued after it land only when
/// that kernel ends (observed: 4 s, until a bounded wait gave up). Writes to such a rank go through
/// pinned host memory instead, a device-to-host then a host-to-device copy, which the copy engines
/// do without an SM.
pub struct EmulatedNic {
    device: u32,
    regions: Regions,
    model: NicModel,
    stream: Option<cust::stream::Stream>,
    flags: VecDeque<Deferred>,
    gpu: Option<crate::gpu::Gpu>,
    /// Bytes written so far.
    pub bytes: u64,
    /// Per destination rank: its memory is on this NIC's GPU.
    same_gpu: Vec<bool>,
    /// Pinned host memory carrying writes to ranks on this GPU, allocated at the first one.
    bounce: Option<crate::gpu::MappedBuffer<u8>>,
    /// Batches whose copies may still read their sources: an event recorded behind each on the
    /// NIC's stream, and the batch's commands.
    reading: VecDeque<(Event, u64)>,
    /// Events of batches done reading, for reuse.
    spare: Vec<Event>,
}

// SAFETY: the stream is used only from the proxy thread after on_proxy_thread.
unsafe impl Send for EmulatedNic {}

impl EmulatedNic {
    /// A NIC on GPU `device` with these address tables and timing; `same_gpu[r]`: rank `r`'s
    /// memory is on this GPU (see the type's docs; the communicator knows it from GPU UUIDs).
    pub fn new(device: u32, regions: Regions, same_gpu: Vec<bool>, model: NicModel) -> Self {
        Self {
            device,
            regions,
            model,
            stream: None,
            flags: VecDeque::new(),
            gpu: None,
            bytes: 0,
            same_gpu,
            bounce: None,
            reading: VecDeque::new(),
            spare: Vec::new(),
        }
    }

    /// The NIC's stream (created by on_proxy_thread).
    fn queue(&self) -> CommResult<&cust::stream::Stream> {
        self.stream.as_ref().ok_or_else(|| bad("used before the proxy thread started it".into()))
    }

    /// Copy `bytes` from device address `src` to `to` (on this GPU) through the pinned bounce
    /// buffer, in pieces: each piece's device-to-host copy, then its host-to-device copy, on the
    /// NIC's stream, whose order keeps a piece in the buffer until it was written out.
    fn copy_through_host(&mut self, to: u64, src: u64, bytes: u64) -> CommResult<()> {
        let host = match &self.bounce {
            Some(b) => b.host_ptr(),
            None => {
                let b = crate::gpu::MappedBuffer::<u8>::zeroed(BOUNCE_BYTES)
                    .map_err(|e| bad(format!("allocating the {BOUNCE_BYTES}-byte bounce buffer: {e}")))?;
                self.bounce.insert(b).host_ptr()
            }
        }
        .cast::<std::ffi::c_void>();
        let stream = self.queue()?.as_inner();
        let mut done = 0u64;
        while done < bytes {
            let n = (bytes - done).min(BOUNCE_BYTES as u64) as usize;
            // SAFETY: `host` holds BOUNCE_BYTES >= n pinned bytes that only this stream uses; the
            // device ranges were checked against registered buffers by the caller.
            let r = unsafe { cust_raw::cuMemcpyDtoHAsync_v2(host, src + done, n, stream) };
            crate::gpu::check_raw("cuMemcpyDtoHAsync", r)?;
            // SAFETY: as above; stream order puts this after the copy into `host`.
            let r = unsafe { cust_raw::cuMemcpyHtoDAsync_v2(to + done, host, n, stream) };
            crate::gpu::check_raw("cuMemcpyHtoDAsync", r)?;
            done += n as u64;
        }
        Ok(())
    }

    /// Behind a batch of `n` commands on the NIC's stream: an event, so that
    /// [`Transport::unreleased`] knows when their copies have read their sources.
    fn mark(&mut self, n: u64) -> CommResult<()> {
        let ev = match self.spare.pop() {
            Some(ev) => ev,
            None => Event::new(EventFlags::DISABLE_TIMING).map_err(|e| bad(format!("creating an event: {e}")))?,
        };
        ev.record(self.queue()?).map_err(|e| bad(format!("recording an event on the NIC's stream: {e}")))?;
        self.reading.push_back((ev, n));
        Ok(())
    }

    fn raise_due_flags(&mut self, all: bool) -> CommResult<()> {
        let now = Instant::now();
        while let Some(f) = self.flags.front() {
            if !all && f.at > now {
                break;
            }
            if all {
                while Instant::now() < f.at {
                    std::hint::spin_loop();
                }
            }
            // After the data on the same stream.
            // SAFETY: addr is a registered, mapped 4-byte flag.
            unsafe { crate::gpu::write_u32_async(self.queue()?, f.addr, f.value)? };
            self.flags.pop_front();
        }
        Ok(())
    }
}

impl Transport for EmulatedNic {
    fn name(&self) -> &'static str {
        "emulated-nic"
    }

    fn on_proxy_thread(&mut self) -> CommResult<()> {
        let gpu = crate::gpu::Gpu::new(self.device)?;
        let s = cust::stream::Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None)
            .map_err(|e| bad(format!("creating the NIC's stream: {e}")))?;
        self.stream = Some(s);
        self.gpu = Some(gpu);
        Ok(())
    }

    fn post(&mut self, cmds: &[FifoCmd]) -> CommResult<()> {
        for c in cmds {
            let dst = c.dst_rank();
            let ranks = self.regions.remote.len();
            if dst as usize >= ranks {
                return Err(bad(format!("command for rank {dst}, but only {ranks} ranks are registered")));
            }
            let now = Instant::now();
            let at = match c.op() {
                OP_WRITE => {
                    let src = self.regions.resolve(c.src, None, c.bytes)?;
                    let to = self.regions.resolve(c.dst, Some(dst), c.bytes)?;
                    if self.same_gpu.get(dst as usize).copied().unwrap_or(false) {
                        self.copy_through_host(to, src, c.bytes)?;
                    } else {
                        let stream = self.queue()?.as_inner();
                        // SAFETY: both ranges were checked against registered buffers.
                        let r = unsafe { cust_raw::cuMemcpyDtoDAsync_v2(to, src, c.bytes as usize, stream) };
                        crate::gpu::check_raw("cuMemcpyDtoDAsync", r)?;
                    }
                    self.bytes += c.bytes;
                    self.model.deliver(now, c.bytes)
                }
                OP_SIGNAL => self.model.deliver(now, 4),
                OP_FENCE => {
                    self.flush()?;
                    continue;
                }
                op => return Err(bad(format!("unknown opcode {op}"))),
            };
            if c.flag != 0 {
                let addr = self.regions.resolve(c.flag, Some(dst), 4)?;
                self.flags.push_back(Deferred { at, addr, value: c.flag_value as u32 });
            }
        }
        if !cmds.is_empty() {
            self.mark(cmds.len() as u64)?;
        }
        self.raise_due_flags(false)
    }

    fn unreleased(&mut self) -> CommResult<u64> {
        while let Some((ev, _)) = self.reading.front() {
            match ev.query().map_err(|e| bad(format!("querying an event of the NIC's stream: {e}")))? {
                EventStatus::Ready => {
                    let (ev, _) = self.reading.pop_front().expect("front exists");
                    self.spare.push(ev);
                }
                EventStatus::NotReady => break,
            }
        }
        Ok(self.reading.iter().map(|&(_, n)| n).sum())
    }

    fn progress(&mut self) -> CommResult<()> {
        self.raise_due_flags(false)
    }

    fn flush(&mut self) -> CommResult<()> {
        self.raise_due_flags(true)?;
        match &self.stream {
            Some(s) => s.synchronize().map_err(|e| bad(format!("synchronising the NIC's stream: {e}"))),
            None => Ok(()),
        }
    }
}
