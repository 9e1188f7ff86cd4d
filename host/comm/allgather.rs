//! The GPU-driven all-gather (see `device/src/kernels/allgather.rs`): rank r's shard lands at
//! `r * shard_bytes` of every rank's output. Ranks on this node are reached over NVLink by the
//! kernel itself; ranks on other nodes through the FIFO and the proxy's transport.
use super::bootstrap::Bootstrap;
use super::error::CommError;
use super::fifo::Fifo;
use super::proxy::{Proxy, ProxyConfig, ProxyStats};
use super::symm::SymmBuffer;
use super::transport::verbs::{VerbsOptions, VerbsTransport};
use super::transport::{EmulatedNic, NicModel, Regions};
use super::world::World;
use crate::abi::{AllGatherParams, RoleSplit, WaitDiag, COPY_BULK, COPY_LSU, MAX_LOCAL_RANKS};
use crate::error::{check_diag, Error, Result};
use crate::gpu::{kernels, DeviceBuffer, DeviceSlice, Gpu, LaunchConfig, MappedBuffer};
use mkernel_device::kernels_info::allgather::{BULK_SMEM_BYTES, THREADS};
use std::sync::Arc;
use std::time::Duration;

/// How the intra-comm CTAs move bytes over NVLink.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NvlinkCopy {
    /// 16-byte vector loads and stores from all 512 threads of a CTA.
    Lsu,
    /// TMA bulk copies through a shared-memory ring, issued by one thread per CTA.
    Bulk,
}

impl std::str::FromStr for NvlinkCopy {
    type Err = String;
    fn from_str(s: &str) -> std::result::Result<Self, String> {
        match s {
            "lsu" => Ok(Self::Lsu),
            "bulk" => Ok(Self::Bulk),
            _ => Err(format!("`{s}`: must be `lsu` or `bulk`")),
        }
    }
}

/// Tuning and transport settings.
#[derive(Clone, Debug)]
pub struct AllGatherOptions {
    /// CTAs copying over NVLink.
    pub intra_ctas: u32,
    /// How they copy.
    pub copy: NvlinkCopy,
    /// The shard is written straight into this rank's slice of the output
    /// ([`AllGather::input`] is that slice): no separate input buffer and no local copy.
    pub in_place: bool,
    /// Bytes per FIFO WRITE for other nodes.
    pub chunk_bytes: u64,
    /// Bound on every device-side wait.
    pub timeout: Duration,
    /// The emulated NIC's timing (used when there are several nodes).
    pub nic: NicModel,
    /// FIFO commands (power of two).
    pub fifo_capacity: u64,
}

impl Default for AllGatherOptions {
    fn default() -> Self {
        Self {
            intra_ctas: 16,
            copy: NvlinkCopy::Bulk,
            in_place: false,
            chunk_bytes: 1 << 20,
            timeout: Duration::from_secs(10),
            nic: NicModel::cx7(),
            fifo_capacity: 4096,
        }
    }
}

/// A bound all-gather: buffers, flags, FIFO and proxy set up once; launched many times.
pub struct AllGather {
    world: World,
    shard_bytes: usize,
    /// None when in place.
    input: Option<DeviceBuffer<u8>>,
    output: SymmBuffer,
    _flags: SymmBuffer,
    _counters: DeviceBuffer<u32>,
    proxy: Option<Proxy>,
    _fifo: Option<Arc<Fifo>>,
    diag: MappedBuffer<WaitDiag>,
    params: AllGatherParams,
}

fn invalid(arg: &'static str, rule: String) -> Error {
    Error::InvalidArgument { arg, rule }
}

impl AllGather {
    /// Collective: every rank calls it with the same `shard_bytes` and options.
    pub fn new(
        gpu: &Gpu,
        boot: &mut Bootstrap,
        world: &World,
        shard_bytes: usize,
        opts: AllGatherOptions,
    ) -> Result<AllGather> {
        if shard_bytes == 0 {
            return Err(invalid("shard_bytes", "must be at least 1".into()));
        }
        if world.local_world_size as usize > MAX_LOCAL_RANKS {
            return Err(invalid(
                "world",
                format!("{} ranks per node; at most {MAX_LOCAL_RANKS}", world.local_world_size),
            ));
        }
        let total = shard_bytes as u64 * world.world_size as u64;
        if total >= 1 << 48 {
            return Err(invalid("shard_bytes", format!("output of {total} bytes exceeds the 2^48 FIFO offset range")));
        }
        if opts.intra_ctas == 0 || opts.intra_ctas > 1024 {
            return Err(invalid("intra_ctas", format!("{} must be in 1..=1024", opts.intra_ctas)));
        }
        let input = if opts.in_place { None } else { Some(gpu.alloc::<u8>(shard_bytes)?) };
        let output = SymmBuffer::new(gpu, boot, world, total as usize)?;
        let input_addr = match &input {
            Some(b) => b.addr(),
            None => output.addr() + world.rank as u64 * shard_bytes as u64,
        };
        let flags = SymmBuffer::new(gpu, boot, world, 4 * world.world_size as usize)?;
        let counters = gpu.upload(&vec![0u32; world.local_world_size as usize])?;
        let diag = gpu.mapped::<WaitDiag>(1)?;
        let mut params = AllGatherParams {
            input: input_addr,
            in_place: opts.in_place as u32,
            output: output.addr(),
            flags: flags.addr(),
            counters: counters.addr(),
            diag: diag.device_addr(),
            timeout_ns: opts.timeout.as_nanos() as u64,
            shard_bytes: shard_bytes as u64,
            chunk_bytes: opts.chunk_bytes,
            rank: world.rank,
            world: world.world_size,
            local_rank: world.local_rank,
            local_world: world.local_world_size,
            roles: RoleSplit {
                compute: 0,
                intra_comm: opts.intra_ctas,
                inter_send: (world.nodes > 1) as u32,
                inter_reduce: 0,
            },
            copy_mode: match opts.copy {
                NvlinkCopy::Lsu => COPY_LSU,
                NvlinkCopy::Bulk => COPY_BULK,
            },
            ..Default::default()
        };
        for lr in 0..world.local_world_size {
            let r = world.local_to_global(lr);
            let missing = || CommError::Bootstrap {
                rank: world.rank,
                what: format!("rank {r} is on this node but its buffers are not mapped (another host?)"),
            };
            params.peer_output[lr as usize] = output.peer(r).ok_or_else(missing)?;
            params.peer_flags[lr as usize] = flags.peer(r).ok_or_else(missing)?;
        }
        let (mut proxy, mut fifo) = (None, None);
        if world.nodes > 1 {
            let f = Arc::new(Fifo::new(gpu, opts.fifo_capacity)?);
            params.fifo = f.params();
            let local = vec![
                (input_addr, shard_bytes as u64),
                (output.addr(), total),
                (flags.addr(), 4 * world.world_size as u64),
            ];
            // Ranks on other hosts are not mapped here: they need real RDMA. MKERNEL_TRANSPORT
            // forces a choice (`verbs` or `emulated`).
            let other_host = (0..world.world_size)
                .any(|r| !world.is_local(r) && (output.peer(r).is_none() || flags.peer(r).is_none()));
            let verbs = match std::env::var("MKERNEL_TRANSPORT").ok().as_deref() {
                Some("verbs") => true,
                Some("emulated") => false,
                None => other_host,
                Some(other) => {
                    return Err(CommError::Env {
                        var: "MKERNEL_TRANSPORT",
                        rule: format!("`{other}`: must be `verbs` or `emulated`"),
                    }
                    .into())
                }
            };
            let transport: Box<dyn super::transport::Transport> = if verbs {
                Box::new(VerbsTransport::connect(world, boot, &local, &VerbsOptions::from_env()?)?)
            } else {
                if other_host {
                    let what =
                        "some ranks are on another host: the emulated NIC only reaches ranks of this host".to_string();
                    return Err(CommError::Transport { transport: "emulated-nic", what }.into());
                }
                let mut regions = Regions { local, remote: Vec::new() };
                for r in 0..world.world_size {
                    let (o, fl) = (output.peer(r).unwrap_or(0), flags.peer(r).unwrap_or(0));
                    regions.remote.push(vec![(0, 0), (o, total), (fl, 4 * world.world_size as u64)]);
                }
                Box::new(EmulatedNic::new(world.device, regions, opts.nic.clone()))
            };
            proxy = Some(Proxy::start(f.clone(), transport, ProxyConfig::default()));
            fifo = Some(f);
        }
        boot.barrier()?;
        Ok(AllGather {
            world: world.clone(),
            shard_bytes,
            input,
            output,
            _flags: flags,
            _counters: counters,
            proxy,
            _fifo: fifo,
            diag,
            params,
        })
    }

    /// This rank's shard: write it here before a launch.
    pub fn input(&self) -> DeviceSlice<'_, u8> {
        match &self.input {
            Some(b) => b.as_slice(),
            None => {
                let r = self.world.rank as usize;
                self.output.local().slice(r * self.shard_bytes..(r + 1) * self.shard_bytes)
            }
        }
    }

    /// The gathered result (`world * shard_bytes`), valid after [`AllGather::wait`].
    pub fn output(&self) -> DeviceSlice<'_, u8> {
        self.output.local().as_slice()
    }

    /// Rank `r`'s output as mapped in this process (None: another host).
    pub fn peer_output(&self, r: u32) -> Option<u64> {
        self.output.peer(r)
    }

    /// Shard size.
    pub fn shard_bytes(&self) -> usize {
        self.shard_bytes
    }

    /// Grid size (intra + inter CTAs).
    pub fn ctas(&self) -> u32 {
        self.params.roles.total()
    }

    /// Enqueue one all-gather (asynchronous). Back-to-back launches are fine while inputs stay
    /// the same; to change inputs between launches use [`AllGather::run`], which also waits until
    /// every rank is done reading.
    pub fn launch(&mut self, gpu: &Gpu) -> Result<()> {
        self.params.epoch = self.params.epoch.wrapping_add(1);
        let smem = if self.params.copy_mode == COPY_BULK { BULK_SMEM_BYTES } else { 0 };
        let cfg = LaunchConfig::linear(self.ctas(), THREADS, smem);
        // SAFETY: every address in params belongs to buffers owned by self (or mapped peers'
        // buffers, alive until every rank passed the closing barrier of run / drop).
        unsafe { gpu.launch(kernels::ALLGATHER, &cfg, &self.params)? };
        Ok(())
    }

    /// Wait for this rank's launches; report a device-side timeout or a proxy error.
    pub fn wait(&self, gpu: &Gpu) -> Result<()> {
        let sync = gpu.synchronize();
        check_diag(&self.diag)?;
        if let Some(p) = &self.proxy {
            p.check()?;
        }
        sync.map_err(Error::from)
    }

    /// Launch, wait, then a bootstrap barrier (all ranks done with this launch's data).
    pub fn run(&mut self, gpu: &Gpu, boot: &mut Bootstrap) -> Result<()> {
        self.launch(gpu)?;
        self.wait(gpu)?;
        boot.barrier()?;
        Ok(())
    }

    /// Proxy counters (None on a single node).
    pub fn proxy_stats(&self) -> Option<ProxyStats> {
        self.proxy.as_ref().map(|p| p.stats())
    }

    /// The process group.
    pub fn world(&self) -> &World {
        &self.world
    }
}
