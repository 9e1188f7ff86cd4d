//! The communicator every fused op borrows: the process group ([`World`]), its bootstrap, a
//! symmetric heap (one allocation per rank, mapped into every rank of the node through CUDA IPC
//! and registered once with the inter-node transport), and, with several nodes, the GPU -> CPU
//! FIFO, the transport and the proxy thread that drains one into the other.
//!
//! Ops allocate their symmetric buffers and flags from the heap ([`Communicator::alloc`]): every
//! rank makes the same allocations in the same order, so a buffer has the same heap offset on
//! every rank, which is what FIFO commands carry (buffer [`BUF_HEAP`]). Construction and
//! allocation are collective.
use super::bootstrap::Bootstrap;
use super::error::{CommError, CommResult};
use super::fifo::Fifo;
use super::heap::HeapAlloc;
use super::proxy::{Proxy, ProxyConfig, ProxyStats};
use super::symm::SymmBuffer;
use super::transport::verbs::{VerbsOptions, VerbsTransport};
use super::transport::{EmulatedNic, NicModel, Regions, Transport};
use super::world::World;
use crate::abi::{FifoParams, BUF_HEAP};
use crate::gpu::{DeviceSlice, Gpu};
use bytemuck::Pod;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// Which transport carries inter-node traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportChoice {
    /// Verbs when some rank is on another host, else the emulated NIC (emulated nodes).
    Auto,
    /// The emulated NIC (every rank on this host).
    Emulated,
    /// RDMA verbs.
    Verbs,
}

impl std::str::FromStr for TransportChoice {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "auto" => Ok(Self::Auto),
            "emulated" => Ok(Self::Emulated),
            "verbs" => Ok(Self::Verbs),
            _ => Err(format!("`{s}`: must be `auto`, `emulated` or `verbs`")),
        }
    }
}

/// How to build a communicator.
#[derive(Clone, Debug)]
pub struct CommOptions {
    /// Bytes of symmetric heap per rank (every op's shared buffers and flags come from it).
    pub heap_bytes: usize,
    /// Bound on every bootstrap step.
    pub timeout: Duration,
    /// Inter-node transport.
    pub transport: TransportChoice,
    /// The emulated NIC's timing.
    pub nic: NicModel,
    /// Verbs settings.
    pub verbs: VerbsOptions,
    /// FIFO commands (a power of two).
    pub fifo_capacity: u64,
    /// Proxy settings.
    pub proxy: ProxyConfig,
}

impl Default for CommOptions {
    fn default() -> Self {
        Self {
            heap_bytes: 1 << 30,
            timeout: Duration::from_secs(60),
            transport: TransportChoice::Auto,
            nic: NicModel::cx7(),
            verbs: VerbsOptions::default(),
            fifo_capacity: 4096,
            proxy: ProxyConfig::default(),
        }
    }
}

impl CommOptions {
    /// Defaults overridden by `MKERNEL_TRANSPORT` (`auto|emulated|verbs`), `MKERNEL_HEAP_BYTES`
    /// and the verbs variables ([`VerbsOptions::from_env`]). The library itself reads no
    /// environment: this is for programs that want the variables.
    pub fn from_env() -> CommResult<Self> {
        let mut o = Self { verbs: VerbsOptions::from_env()?, ..Self::default() };
        if let Ok(v) = std::env::var("MKERNEL_TRANSPORT") {
            o.transport = v.parse().map_err(|rule| CommError::Env { var: "MKERNEL_TRANSPORT", rule })?;
        }
        if let Ok(v) = std::env::var("MKERNEL_HEAP_BYTES") {
            o.heap_bytes = v.parse().map_err(|_| CommError::Env {
                var: "MKERNEL_HEAP_BYTES",
                rule: format!("`{v}` is not a byte count"),
            })?;
        }
        Ok(o)
    }
}

/// See the module docs.
pub struct Communicator {
    // Fields drop in this order: the proxy (and its transport's registrations of the heap, its
    // streams writing into it) before the FIFO and the heap itself.
    proxy: Option<Proxy>,
    fifo: Option<Arc<Fifo>>,
    world: World,
    boot: Mutex<Bootstrap>,
    heap: SymmBuffer,
    alloc: Mutex<HeapAlloc>,
    /// Allocations that waited to reuse dropped regions ([`Communicator::alloc`]).
    reuses: std::sync::atomic::AtomicU64,
    /// The GPU the heap is on (whose context `alloc` makes current).
    device: u32,
    transport: &'static str,
    rails: Vec<String>,
    timeout: Duration,
}

/// What [`Communicator::bring_up`] makes.
struct Parts {
    heap: SymmBuffer,
    fifo: Option<Arc<Fifo>>,
    proxy: Option<Proxy>,
    transport: &'static str,
    rails: Vec<String>,
}

/// Bytes every heap allocation is aligned to (TMA needs 16, tensor maps of tiles like 128+).
pub const HEAP_ALIGN: usize = 1024;

impl Communicator {
    /// Collective: connect the bootstrap, allocate and map the heap, and with several nodes bring
    /// up the FIFO, the transport and the proxy. Every rank calls it with the same options.
    pub fn new(gpu: &Gpu, world: &World, opts: CommOptions) -> crate::Result<Communicator> {
        if opts.heap_bytes == 0 {
            return Err(crate::error::invalid("heap_bytes", "must be at least 1"));
        }
        // Checked here on one node too (where no FIFO is made), under the option's name: an
        // option accepted on one node and refused on two would surprise.
        super::fifo::check_capacity("fifo_capacity", opts.fifo_capacity)?;
        let mut boot = Bootstrap::connect(world, opts.timeout)?;
        let Parts { heap, fifo, proxy, transport, rails } = match Self::bring_up(gpu, world, &opts, &mut boot) {
            Ok(parts) => parts,
            Err(e) => {
                // The other ranks would otherwise see only this one disconnecting.
                boot.abort(&e.to_string());
                return Err(e);
            }
        };
        Ok(Communicator {
            world: world.clone(),
            boot: Mutex::new(boot),
            alloc: Mutex::new(HeapAlloc::new(heap.len())),
            reuses: Default::default(),
            device: gpu.info().ordinal,
            heap,
            fifo,
            proxy,
            transport,
            rails,
            timeout: opts.timeout,
        })
    }

    /// [`Communicator::new`] after the bootstrap joined: the heap, and with several nodes the
    /// FIFO, the transport and the proxy, then a barrier (a failure here is told to the other
    /// ranks through the bootstrap).
    fn bring_up(gpu: &Gpu, world: &World, opts: &CommOptions, boot: &mut Bootstrap) -> crate::Result<Parts> {
        let heap = SymmBuffer::new(gpu, boot, world, opts.heap_bytes)?;
        let (mut fifo, mut proxy, mut transport) = (None, None, "none (one node)");
        let mut rails = Vec::new();
        if world.nodes > 1 {
            let f = Arc::new(Fifo::new(gpu, opts.fifo_capacity)?);
            let local = vec![(heap.addr(), heap.len() as u64)];
            // Ranks on other hosts are not mapped here: they need real RDMA.
            let other_host = (0..world.world_size).any(|r| !world.is_local(r) && heap.peer(r).is_none());
            let verbs = match opts.transport {
                TransportChoice::Verbs => true,
                TransportChoice::Emulated => false,
                TransportChoice::Auto => other_host,
            };
            let t: Box<dyn Transport> = if verbs {
                let v = VerbsTransport::connect(world, boot, &local, &opts.verbs)?;
                rails = v.rails().iter().map(|r| r.to_string()).collect();
                Box::new(v)
            } else {
                if other_host {
                    let what =
                        "some ranks are on another host: the emulated NIC only reaches ranks of this host".into();
                    return Err(CommError::Transport { transport: "emulated-nic", what }.into());
                }
                let remote =
                    (0..world.world_size).map(|r| vec![(heap.peer(r).unwrap_or(0), heap.len() as u64)]).collect();
                let same_gpu = (0..world.world_size).map(|r| heap.on_this_gpu(r)).collect();
                Box::new(EmulatedNic::new(world.device, Regions { local, remote }, same_gpu, opts.nic.clone()))
            };
            transport = t.name();
            proxy = Some(Proxy::start(f.clone(), t, opts.proxy)?);
            fifo = Some(f);
        }
        boot.barrier()?;
        Ok(Parts { heap, fifo, proxy, transport, rails })
    }

    /// The process group.
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The inter-node transport's name (`none (one node)` on a single node).
    pub fn transport(&self) -> &'static str {
        self.transport
    }

    /// The NICs this rank's verbs transport uses, each with why it was chosen (`mlx5_0 (same
    /// PCIe switch)`); empty without verbs.
    pub fn rails(&self) -> &[String] {
        &self.rails
    }

    /// The bootstrap, for collective host steps.
    pub fn bootstrap(&self) -> MutexGuard<'_, Bootstrap> {
        self.boot.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Every rank arrives before any leaves.
    pub fn barrier(&self) -> CommResult<()> {
        self.bootstrap().barrier()
    }

    /// Collective: check that every rank passed the same `value` for `what` (a shape, options);
    /// otherwise an error naming the ranks that differ from rank 0 and what each passed.
    pub fn agree(&self, what: &'static str, value: &str) -> crate::Result<()> {
        let all = self.bootstrap().all_gather(value.as_bytes())?;
        let first = String::from_utf8_lossy(&all[0]).into_owned();
        let differ: Vec<String> = all
            .iter()
            .enumerate()
            .filter(|(_, v)| **v != all[0])
            .map(|(r, v)| format!("rank {r}: {}", String::from_utf8_lossy(v)))
            .collect();
        if differ.is_empty() {
            return Ok(());
        }
        let rule = format!("ranks disagree (rank 0: {first}; {})", differ.join("; "));
        Err(crate::Error::InvalidArgument { arg: what, rule })
    }

    /// Collective: `bytes` of the heap at the same offset on every rank, zeroed and mapped into
    /// every rank of this node; retired when dropped. Every rank must make the same allocations,
    /// drops and launches in the same order.
    ///
    /// Dropped regions are reused only when the free ones are used up, and only after every rank
    /// has drained its GPU's streams and its proxy (commands to other nodes completed, their
    /// flags raised) and met the others at a barrier: a launch of the op that held them may
    /// still be running when it is dropped, here or on a peer whose last flags land in this
    /// rank's copy. The drain also waits for this rank's other launches, which end only once
    /// their peers launched too (hence the order above; a device wait bounds it otherwise). A
    /// failure on the way (a stuck stream, a rank gone from the barrier) is returned and leaves
    /// the dropped regions retired.
    pub fn alloc(&self, bytes: usize) -> crate::Result<HeapRegion<'_>> {
        // The heap's context, for the drain and the zero fill (the caller's thread may have
        // another one current).
        crate::gpu::make_device_current(self.device)?;
        let offset = match self.reserve(bytes, false)? {
            Some(offset) => offset,
            None => {
                crate::gpu::drain_blocking_streams()?;
                if let Some(p) = &self.proxy {
                    p.flush(self.timeout)?;
                }
                self.barrier()?;
                let offset = self.reserve(bytes, true)?.expect("reserve(.., true) gives an offset or an error");
                self.reuses.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                offset
            }
        };
        let region = HeapRegion { comm: self, offset, bytes: bytes.max(1) };
        region.bytes_view().fill_bytes(0)?;
        Ok(region)
    }

    /// How many allocations so far waited (drained this GPU's streams and met the other ranks)
    /// to reuse the memory of dropped regions.
    pub fn heap_reuses(&self) -> u64 {
        self.reuses.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Reserve `bytes` in the heap's free ranges, after reclaiming the retired ones with
    /// `reclaim`. `Ok(None)`: only retired ranges could hold it (so `reclaim` was false).
    fn reserve(&self, bytes: usize, reclaim: bool) -> crate::Result<Option<usize>> {
        let mut a = self.alloc.lock().unwrap_or_else(|p| p.into_inner());
        if reclaim {
            a.reclaim();
        }
        if let Some(offset) = a.alloc(bytes, HEAP_ALIGN) {
            return Ok(Some(offset));
        }
        if !reclaim && a.retired() > 0 {
            return Ok(None);
        }
        let rule = format!(
            "{bytes} bytes do not fit the symmetric heap ({} of {} bytes used, largest free range {}): raise CommOptions::heap_bytes",
            a.used(),
            a.capacity(),
            a.largest_free()
        );
        Err(crate::error::invalid("heap_bytes", rule))
    }

    /// The FIFO kernels push to (all zeros, unused, on a single node).
    pub fn fifo_params(&self) -> FifoParams {
        self.fifo.as_ref().map(|f| f.params()).unwrap_or_default()
    }

    /// Report a proxy (transport) failure, if one happened.
    pub fn check(&self) -> crate::Result<()> {
        if let Some(p) = &self.proxy {
            p.check()?;
        }
        Ok(())
    }

    /// Proxy counters (None on a single node).
    pub fn proxy_stats(&self) -> Option<ProxyStats> {
        self.proxy.as_ref().map(|p| p.stats())
    }

    /// Shut down, returning what the proxy found (None on a single node): it drains the FIFO,
    /// flushes the transport and stops, within its `shutdown_timeout`; commands left in the ring,
    /// a failed flush or a thread that would not end are the error. Dropping a communicator does
    /// the same and prints such an error instead, having no caller to return it to.
    pub fn shutdown(mut self) -> crate::Result<Option<ProxyStats>> {
        Ok(self.proxy.take().map(Proxy::shutdown).transpose()?)
    }

    /// Whether rank `r` (another rank) has its memory on this rank's GPU (ranks sharing one).
    pub fn shares_gpu(&self, r: u32) -> bool {
        r != self.world.rank && self.heap.on_this_gpu(r)
    }

    /// Bound on bootstrap steps.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// Address of byte `offset` of rank `r`'s heap as mapped here (None: another host).
    fn peer_addr(&self, r: u32, offset: usize) -> Option<u64> {
        self.heap.peer(r).map(|a| a + offset as u64)
    }
}

/// A range of the symmetric heap (see [`Communicator::alloc`]).
pub struct HeapRegion<'c> {
    comm: &'c Communicator,
    offset: usize,
    bytes: usize,
}

impl HeapRegion<'_> {
    /// Offset in the heap (the same on every rank): what FIFO commands carry with [`BUF_HEAP`].
    pub fn offset(&self) -> u64 {
        self.offset as u64
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.bytes
    }

    /// True when empty (never: at least one byte).
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }

    /// Device address of this rank's copy.
    pub fn addr(&self) -> u64 {
        self.comm.heap.addr() + self.offset as u64
    }

    /// Device address of rank `r`'s copy as mapped in this process (None: another host).
    pub fn peer(&self, r: u32) -> Option<u64> {
        self.comm.peer_addr(r, self.offset)
    }

    /// This rank's copy, as bytes.
    pub fn bytes_view(&self) -> DeviceSlice<'_, u8> {
        self.view()
    }

    /// This rank's copy as elements of `T` (the region's size and 1024-byte alignment suit any
    /// element type whose size divides it).
    pub fn view<T: Pod>(&self) -> DeviceSlice<'_, T> {
        let len = self.bytes / std::mem::size_of::<T>();
        // SAFETY: the range lies inside the heap allocation, which outlives `self` (it belongs to
        // the communicator `self` borrows), and is aligned to HEAP_ALIGN.
        unsafe { DeviceSlice::from_raw(self.addr(), len) }
    }

    /// `(heap id, offset)` as a FIFO location of byte `off` of this region.
    pub fn fifo_loc(&self, off: u64) -> u64 {
        crate::abi::FifoCmd::loc(BUF_HEAP, self.offset as u64 + off)
    }
}

impl Drop for HeapRegion<'_> {
    fn drop(&mut self) {
        self.comm.alloc.lock().unwrap_or_else(|p| p.into_inner()).retire(self.offset);
    }
}

/// The harness's rank group over a communicator's bootstrap.
impl crate::bench::Group for &Communicator {
    fn barrier(&mut self) -> crate::Result<()> {
        Ok(Communicator::barrier(self)?)
    }
    fn max(&mut self, v: f64) -> crate::Result<f64> {
        crate::bench::Group::max(&mut *self.bootstrap(), v)
    }
}
