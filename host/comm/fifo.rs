//! The GPU -> CPU command FIFO, host side. The ring lives in pinned, GPU-mapped host memory; the
//! head counter in device memory (GPU threads claim positions with atomics); the consumed
//! position ("tail") in mapped memory, published by the proxy for back-pressure, and the released
//! position next to it: every command below it has read its source (the transport says when),
//! so a kernel that waits for it before it ends leaves its sources free to rewrite.
//!
//! The protocol (device side in `device/src/comm/fifo.rs`, the same steps): a producer claims
//! ticket `t` only once its slot is free: it reads the head, waits (bounded) while
//! `t >= tail + capacity`, and then moves the head from `t` to `t + 1` with a compare-and-swap
//! (retrying with the head it saw when another producer won). A claimed slot is therefore always
//! free, so the producer writes it at once: a producer that times out has claimed nothing and
//! leaves no hole that would stop delivery of every later ticket. It writes words 1..8 of slot
//! `t % capacity`, then the header (op, flags, dst, low 32 bits of `t`) with a release store. The
//! consumer expects tickets in order: it takes slot `t % capacity` only when the header is
//! non-zero and carries `t`'s low bits (so a half-written or stale slot is never read), clears the
//! header, and publishes `tail = t + 1` (release).
use super::command::decode;
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
    /// The released position: every command below it has read its source. Producers that must
    /// not end before their WRITEs read their sources wait on it (`fifo_quiet` on the GPU).
    fn released(&self) -> &AtomicU64;
    /// The next ticket producers will claim, where the host can read it (a ring whose head lives
    /// in device memory says `None`).
    fn claimed(&self) -> Option<u64> {
        None
    }
}

/// The ring's capacity rule, for the argument named `arg` (a ring's `capacity`, a communicator's
/// `fifo_capacity`).
pub(crate) fn check_capacity(arg: &'static str, capacity: u64) -> CommResult<()> {
    if capacity < 2 || !capacity.is_power_of_two() || capacity > (1 << 30) {
        return Err(CommError::InvalidArgument { arg, rule: format!("{capacity} must be a power of two in 2..=2^30") });
    }
    Ok(())
}

/// A ring in ordinary host memory: for CPU producers and tests.
pub struct HostRing {
    words: Vec<AtomicU64>,
    tail: AtomicU64,
    released: AtomicU64,
    /// Next ticket for CPU producers.
    head: AtomicU64,
}

impl HostRing {
    /// An empty ring of `capacity` commands (a power of two in 2..=2^30). The slots are
    /// allocated zeroed and untouched, so a large ring costs address space, not memory, until
    /// used; an allocation the system refuses is an error, not an abort.
    pub fn new(capacity: u64) -> CommResult<Self> {
        check_capacity("capacity", capacity)?;
        Ok(Self {
            words: zeroed_words(capacity)?,
            tail: AtomicU64::new(0),
            released: AtomicU64::new(0),
            head: AtomicU64::new(0),
        })
    }

    /// Push like a GPU thread would: `cmd` is checked first (a bad command is an error and never
    /// enters the ring), then a ticket is claimed once its slot is free (bounded wait while full;
    /// on timeout nothing was claimed). Returns the ticket.
    pub fn push(&self, cmd: FifoCmd, timeout: Duration) -> CommResult<u64> {
        decode(&cmd).map_err(|e| CommError::InvalidArgument { arg: "cmd", rule: e.to_string() })?;
        let ticket = claim(self, &self.head, timeout)?;
        publish(self, ticket, cmd);
        Ok(ticket)
    }
}

/// `capacity * WORDS` zeroed atomics, or a typed error when the allocation is refused.
fn zeroed_words(capacity: u64) -> CommResult<Vec<AtomicU64>> {
    let n = capacity as usize * WORDS;
    let refused = || CommError::InvalidArgument {
        arg: "capacity",
        rule: format!("{capacity} slots need {} bytes of host memory, which the system refused", n * 8),
    };
    let layout = std::alloc::Layout::array::<AtomicU64>(n).map_err(|_| refused())?;
    // SAFETY: the layout has a non-zero size (capacity >= 2).
    let ptr = unsafe { std::alloc::alloc_zeroed(layout) } as *mut AtomicU64;
    if ptr.is_null() {
        return Err(refused());
    }
    // SAFETY: `ptr` was allocated by the global allocator with the layout of `[AtomicU64; n]`
    // (what `Vec` uses for capacity n); all-zero bytes are a valid `AtomicU64`.
    Ok(unsafe { Vec::from_raw_parts(ptr, n, n) })
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
    fn released(&self) -> &AtomicU64 {
        &self.released
    }
    fn claimed(&self) -> Option<u64> {
        Some(self.head.load(Ordering::Acquire))
    }
}

/// Claim the next ticket of `head` once its slot is free, waiting at most `timeout` while the
/// ring is full. On timeout nothing was claimed (the error names the ticket and the tail seen).
pub fn claim(ring: &dyn RingMemory, head: &AtomicU64, timeout: Duration) -> CommResult<u64> {
    let cap = ring.capacity();
    let start = Instant::now();
    let mut spins = 0u32;
    let mut ticket = head.load(Ordering::Relaxed);
    loop {
        // Acquire: the consumer cleared the slot before publishing this tail.
        let tail = ring.tail().load(Ordering::Acquire);
        if ticket < tail + cap {
            match head.compare_exchange_weak(ticket, ticket + 1, Ordering::Relaxed, Ordering::Relaxed) {
                Ok(_) => return Ok(ticket),
                Err(seen) => {
                    ticket = seen;
                    continue;
                }
            }
        }
        if start.elapsed() > timeout {
            return Err(CommError::Transport {
                transport: "fifo",
                what: format!(
                    "producer waited {timeout:?} for a free slot for ticket {ticket} (consumer at {tail}, \
                     capacity {cap}; consumer stuck?); nothing was claimed"
                ),
            });
        }
        // Spin briefly, then yield: CPU producers must not starve the proxy of a core.
        spins += 1;
        if spins > 64 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
        ticket = head.load(Ordering::Relaxed);
    }
}

/// Write `cmd` into the slot of `ticket`, which [`claim`] returned (so the slot is free): words
/// 1..8, then the header with a release store.
pub fn publish(ring: &dyn RingMemory, ticket: u64, cmd: FifoCmd) {
    let w: [u64; WORDS] = bytemuck::cast(cmd);
    let base = (ticket % ring.capacity()) as usize * WORDS;
    for (i, v) in w.iter().enumerate().skip(1) {
        ring.words()[base + i].store(*v, Ordering::Relaxed);
    }
    ring.words()[base]
        .store(FifoCmd::header_word(cmd.op(), (cmd.header >> 8) & 0xff, cmd.dst_rank(), ticket), Ordering::Release);
}

/// Commands left in `ring` when its consumer stopped at `next`: published slots it never took and
/// tickets claimed but never published. `None` when the ring is empty.
pub fn leftovers(ring: &dyn RingMemory, next: u64) -> Option<String> {
    let words = ring.words();
    let published: Vec<u32> = (0..ring.capacity() as usize)
        .map(|s| words[s * WORDS].load(Ordering::Acquire))
        .filter(|&h| h != 0)
        .map(|h| (h >> 32) as u32)
        .collect();
    let unpublished = ring.claimed().map_or(0, |h| h.saturating_sub(next).saturating_sub(published.len() as u64));
    if published.is_empty() && unpublished == 0 {
        return None;
    }
    let mut shown: Vec<String> = published.iter().take(8).map(u32::to_string).collect();
    if published.len() > shown.len() {
        shown.push(format!("... {} more", published.len() - shown.len()));
    }
    Some(format!(
        "{} command(s) left in the ring (tickets {}) and {unpublished} claimed but never written; the \
         consumer expected ticket {next}",
        published.len(),
        if shown.is_empty() { "none".into() } else { shown.join(", ") }
    ))
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

    /// Move up to `max` ready commands into `out` (never blocks); publishes the new tail. Any
    /// published header counts, op 0 included: the proxy decodes what it takes and rejects it.
    pub fn poll(&mut self, ring: &dyn RingMemory, out: &mut Vec<FifoCmd>, max: usize) -> usize {
        let cap = ring.capacity();
        let words = ring.words();
        let mut n = 0;
        while n < max {
            let base = (self.next % cap) as usize * WORDS;
            let header = words[base].load(Ordering::Acquire);
            if header == 0 || (header >> 32) as u32 != self.next as u32 {
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

/// A FIFO a GPU pushes into: ring, tail and released position in mapped host memory, head in
/// device memory.
pub struct Fifo {
    ring: MappedBuffer<u64>,
    /// The tail, then the released position.
    positions: MappedBuffer<u64>,
    /// head and tail cache, in device memory.
    counters: DeviceBuffer<u64>,
    capacity: u64,
}

impl Fifo {
    /// A FIFO of `capacity` commands (a power of two) for `gpu`.
    pub fn new(gpu: &Gpu, capacity: u64) -> CommResult<Fifo> {
        check_capacity("capacity", capacity)?;
        let ring = gpu.mapped::<u64>(capacity as usize * WORDS)?;
        let positions = gpu.mapped::<u64>(2)?;
        let counters = gpu.upload(&[0u64, 0u64])?;
        Ok(Fifo { ring, positions, counters, capacity })
    }

    /// What kernels need to push.
    pub fn params(&self) -> FifoParams {
        FifoParams {
            ring: self.ring.device_addr(),
            head: self.counters.addr(),
            tail: self.positions.device_addr(),
            capacity: self.capacity,
            tail_cache: self.counters.addr() + 8,
            released: self.positions.device_addr() + 8,
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
        self.positions.atomic(0)
    }
    fn capacity(&self) -> u64 {
        self.capacity
    }
    fn released(&self) -> &AtomicU64 {
        self.positions.atomic(1)
    }
}
