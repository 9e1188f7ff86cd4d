//! The GPU -> CPU command FIFO, host side. The ring lives in pinned, GPU-mapped host memory; the
//! head counter in device memory (GPU threads claim positions with atomics); the consumed
//! position ("tail") in mapped memory, published by the proxy for back-pressure.
//!
//! The protocol (device side in `device/src/comm/fifo.rs`): a producer claims ticket `t`, waits
//! while `t >= tail + capacity`, writes words 1..8 of slot `t % capacity`, then the header (op,
//! dst, low 32 bits of `t`) with a release store. The consumer expects tickets in order: it takes
//! slot `t % capacity` only when the header is non-empty and carries `t`'s low bits (so a
//! half-written or stale slot is never read), clears the header, and publishes `tail = t + 1`
//! (release).
use super::error::{CommError, CommResult};
use crate::abi::{FifoCmd, FifoParams};
use crate::gpu::{DeviceBuffer, Gpu, MappedBuffer};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

const WORDS: usize = 8;

/// Memory holding a ring: `capacity * 8` words and the tail word.
pub trait RingMemory: Send + Sync {
    /// The slots, 8 words each; word 0 of a slot is its header (zero while empty).
    fn words(&self) -> &[AtomicU64];
    /// The consumed position: the next ticket the consumer will take. Producers wait on it when
    /// the ring is full.
    fn tail(&self) -> &AtomicU64;
    /// Slots in the ring (a power of two).
    fn capacity(&self) -> u64;
}

fn check_capacity(capacity: u64) -> CommResult<()> {
    if capacity < 2 || !capacity.is_power_of_two() || capacity > (1 << 30) {
        return Err(CommError::InvalidArgument {
            arg: "capacity",
            rule: format!("{capacity} must be a power of two in 2..=2^30"),
        });
    }
    Ok(())
}

/// A ring in ordinary host memory: for CPU producers and tests.
pub struct HostRing {
    words: Vec<AtomicU64>,
    tail: AtomicU64,
    /// Next ticket for CPU producers.
    head: AtomicU64,
}

impl HostRing {
    /// An empty ring of `capacity` commands (a power of two in 2..=2^30).
    pub fn new(capacity: u64) -> CommResult<Self> {
        check_capacity(capacity)?;
        Ok(Self {
            words: (0..capacity as usize * WORDS).map(|_| AtomicU64::new(0)).collect(),
            tail: AtomicU64::new(0),
            head: AtomicU64::new(0),
        })
    }

    /// Push like a GPU thread would (bounded wait while full).
    pub fn push(&self, cmd: FifoCmd, timeout: Duration) -> CommResult<u64> {
        let ticket = self.head.fetch_add(1, Ordering::Relaxed);
        push_slot(self, ticket, cmd, timeout)?;
        Ok(ticket)
    }
}

impl RingMemory for HostRing {
    fn words(&self) -> &[AtomicU64] {
        &self.words
    }
    fn tail(&self) -> &AtomicU64 {
        &self.tail
    }
    fn capacity(&self) -> u64 {
        (self.words.len() / WORDS) as u64
    }
}

/// Write `cmd` into the slot of `ticket` following the producer protocol.
pub fn push_slot(ring: &dyn RingMemory, ticket: u64, cmd: FifoCmd, timeout: Duration) -> CommResult<()> {
    let cap = ring.capacity();
    let start = Instant::now();
    let mut spins = 0u32;
    while ticket >= ring.tail().load(Ordering::Acquire) + cap {
        if start.elapsed() > timeout {
            return Err(CommError::Transport {
                transport: "fifo",
                what: format!("producer of ticket {ticket} waited {timeout:?} for a free slot (consumer stuck?)"),
            });
        }
        // Spin briefly, then yield: CPU producers must not starve the proxy of a core.
        spins += 1;
        if spins > 64 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
    let w: [u64; WORDS] = bytemuck::cast(cmd);
    let base = (ticket % cap) as usize * WORDS;
    for (i, v) in w.iter().enumerate().skip(1) {
        ring.words()[base + i].store(*v, Ordering::Relaxed);
    }
    ring.words()[base]
        .store(FifoCmd::header_word(cmd.op(), (cmd.header >> 8) & 0xff, cmd.dst_rank(), ticket), Ordering::Release);
    Ok(())
}

/// Takes commands off a ring in ticket order.
#[derive(Debug, Default)]
pub struct Consumer {
    next: u64,
}

impl Consumer {
    /// Position of the next command expected.
    pub fn position(&self) -> u64 {
        self.next
    }

    /// Move up to `max` ready commands into `out` (never blocks); publishes the new tail.
    pub fn poll(&mut self, ring: &dyn RingMemory, out: &mut Vec<FifoCmd>, max: usize) -> usize {
        let cap = ring.capacity();
        let words = ring.words();
        let mut n = 0;
        while n < max {
            let base = (self.next % cap) as usize * WORDS;
            let header = words[base].load(Ordering::Acquire);
            if header & 0xff == 0 || (header >> 32) as u32 != self.next as u32 {
                break;
            }
            let mut w = [0u64; WORDS];
            w[0] = header;
            for (i, v) in w.iter_mut().enumerate().skip(1) {
                *v = words[base + i].load(Ordering::Relaxed);
            }
            words[base].store(0, Ordering::Relaxed);
            out.push(bytemuck::cast(w));
            self.next += 1;
            n += 1;
        }
        if n > 0 {
            ring.tail().store(self.next, Ordering::Release);
        }
        n
    }
}

/// A FIFO a GPU pushes into: ring and tail in mapped host memory, head in device memory.
pub struct Fifo {
    ring: MappedBuffer<u64>,
    tail: MappedBuffer<u64>,
    /// head and tail cache, in device memory.
    counters: DeviceBuffer<u64>,
    capacity: u64,
}

impl Fifo {
    /// A FIFO of `capacity` commands (a power of two) for `gpu`.
    pub fn new(gpu: &Gpu, capacity: u64) -> CommResult<Fifo> {
        check_capacity(capacity)?;
        let ring = gpu.mapped::<u64>(capacity as usize * WORDS)?;
        let tail = gpu.mapped::<u64>(1)?;
        let counters = gpu.upload(&[0u64, 0u64])?;
        Ok(Fifo { ring, tail, counters, capacity })
    }

    /// What kernels need to push.
    pub fn params(&self) -> FifoParams {
        FifoParams {
            ring: self.ring.device_addr(),
            head: self.counters.addr(),
            tail: self.tail.device_addr(),
            capacity: self.capacity,
            tail_cache: self.counters.addr() + 8,
        }
    }
}

impl RingMemory for Fifo {
    fn words(&self) -> &[AtomicU64] {
        // SAFETY: the mapped allocation holds capacity * 8 u64, lives as long as self, and is
        // only accessed atomically from the host.
        unsafe { std::slice::from_raw_parts(self.ring.host_ptr() as *const AtomicU64, self.ring.len()) }
    }
    fn tail(&self) -> &AtomicU64 {
        self.tail.atomic(0)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
}
