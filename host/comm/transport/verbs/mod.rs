//! RDMA verbs transport (InfiniBand / RoCE, reliable-connected QPs) through `rdma-sys`.
//!
//! The protocol (messages, lanes, flags, selective signalling, the host-staged path) lives in
//! [`engine`] and is tested against a simulated NIC; this module binds it to the verbs:
//! - Bring-up ([`VerbsTransport::connect`], collective): open the device, a protection domain
//!   and one completion queue; `lanes` RC QPs per rank on another node; register the GPU
//!   buffers, by dma-buf (`cuMemGetHandleForAddressRange` + `ibv_reg_dmabuf_mr`) or else
//!   `ibv_reg_mr` on the GPU address (nvidia-peermem). If any rank can register neither (or
//!   `MKERNEL_VERBS_STAGED=1`), every rank switches to host-staged mode and registers a pinned
//!   host staging area instead. QP numbers, GIDs, PSNs and regions travel through the bootstrap;
//!   each QP goes INIT -> RTR -> RTS; receives for staged immediates are posted before the
//!   closing barrier.
//! - [`IbvNic`]: `ibv_post_send` (RDMA WRITE, inline flag writes, WRITE WITH IMMEDIATE,
//!   zero-length signalled writes), `ibv_post_recv`, `ibv_poll_cq`.
//! - [`CudaMem`]: the staged path's copies and flag writes on one CUDA stream, completion by
//!   events.
//!
//! What has run: device discovery and its error where no RDMA device exists (our GPU machines
//! have none; soft-RoCE cannot be loaded there), the QP attribute logic, and the whole engine
//! against the simulated NIC (unit tests). What has NOT run on a NIC: every verbs call of
//! `IbvNic` and `connect`, and `CudaMem`. Not written: EFA (SRD QPs through `efadv`, which
//! reorder: they would use the staged path's write-with-immediate receive logic for flags).
pub mod engine;
#[cfg(test)]
mod sim;

pub use engine::{EngineConfig, RemoteRegion, StagedConfig};

use crate::abi::FifoCmd;
use crate::comm::bootstrap::Bootstrap;
use crate::comm::error::{CommError, CommResult};
use crate::comm::transport::Transport;
use crate::comm::world::World;
use bytemuck::{Pod, Zeroable};
use engine::{err, Completion, CompletionKind, Engine, LocalRegion, Mem, Nic, Staging, WorkRequest, WrOp};
use rdma_sys::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::ptr;

fn os_err(call: &str) -> CommError {
    err(format!("{call} failed: {}", std::io::Error::last_os_error()))
}

/// How to bring up the verbs transport.
#[derive(Clone, Debug)]
pub struct VerbsOptions {
    /// RDMA device name (None: the first one).
    pub device: Option<String>,
    /// Use host staging even where GPU memory could be registered.
    pub force_staged: bool,
    /// Staging geometry when staged.
    pub staged: StagedConfig,
    /// The engine's tuning (`staged` is set by `connect`).
    pub engine: EngineConfig,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        Self {
            device: None,
            force_staged: false,
            staged: StagedConfig { slots: 16, slot_bytes: 1 << 20 },
            engine: EngineConfig::default(),
        }
    }
}

impl VerbsOptions {
    /// Defaults overridden by `MKERNEL_IB_DEVICE`, `MKERNEL_VERBS_LANES` and
    /// `MKERNEL_VERBS_STAGED=1`.
    pub fn from_env() -> CommResult<Self> {
        let mut o = Self {
            device: std::env::var("MKERNEL_IB_DEVICE").ok(),
            force_staged: std::env::var("MKERNEL_VERBS_STAGED").is_ok_and(|v| v == "1"),
            ..Self::default()
        };
        if let Ok(v) = std::env::var("MKERNEL_VERBS_LANES") {
            o.engine.lanes = v.parse().map_err(|_| CommError::Env {
                var: "MKERNEL_VERBS_LANES",
                rule: format!("`{v}`: a number of QPs per peer, 1..=16"),
            })?;
        }
        Ok(o)
    }
}

/// Names of the RDMA devices on this machine (empty where there are none or no driver).
pub fn rdma_devices() -> Vec<String> {
    let mut n = 0i32;
    // SAFETY: ibv_get_device_list returns an array of n devices (or NULL) that we free below.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        if list.is_null() {
            return Vec::new();
        }
        let names = (0..n.max(0) as usize)
            .filter_map(|i| {
                let d = *list.add(i);
                let name = if d.is_null() { ptr::null() } else { ibv_get_device_name(d) };
                (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
            })
            .collect();
        ibv_free_device_list(list);
        names
    }
}

/// One end of an RC connection, as exchanged through the bootstrap.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct QpInfo {
    /// The port's LID (InfiniBand addressing; 0 on RoCE, which addresses by `gid`).
    pub lid: u16,
    /// The HCA port number the QP uses.
    pub port: u8,
    /// Index of `gid` in the port's GID table (the source GID on RoCE).
    pub gid_index: u8,
    /// The QP number.
    pub qpn: u32,
    /// Starting packet sequence number of this end's send queue.
    pub psn: u32,
    /// Padding, so the struct is `Pod` and travels as raw bytes; always 0.
    pub _pad: u32,
    /// The port's GID; all zero: address by LID only (no GRH).
    pub gid: [u8; 16],
}
const _: () = assert!(std::mem::size_of::<QpInfo>() == 32);

/// The attribute mask and fields for one RC state transition (pure, so it is testable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpStep {
    /// RESET -> INIT: port, partition key and access rights (local write, remote write).
    Init,
    /// INIT -> RTR (ready to receive): the peer's QP number, PSN and address, path MTU.
    Rtr,
    /// RTR -> RTS (ready to send): our PSN, timeouts and retry counts.
    Rts,
}

/// Attributes of `step` for a QP talking to `remote` from `local`.
pub fn qp_attr(step: QpStep, local: &QpInfo, remote: &QpInfo) -> (ibv_qp_attr, ibv_qp_attr_mask) {
    // SAFETY: ibv_qp_attr is plain data; zero is a valid starting point.
    let mut a: ibv_qp_attr = unsafe { std::mem::zeroed() };
    use ibv_qp_attr_mask as M;
    match step {
        QpStep::Init => {
            a.qp_state = ibv_qp_state::IBV_QPS_INIT;
            a.pkey_index = 0;
            a.port_num = local.port;
            a.qp_access_flags =
                (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE).0;
            (a, M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_ACCESS_FLAGS)
        }
        QpStep::Rtr => {
            a.qp_state = ibv_qp_state::IBV_QPS_RTR;
            a.path_mtu = ibv_mtu::IBV_MTU_4096;
            a.dest_qp_num = remote.qpn;
            a.rq_psn = remote.psn;
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 12;
            a.ah_attr.dlid = remote.lid;
            a.ah_attr.port_num = local.port;
            if remote.gid != [0; 16] {
                // RoCE (and routed IB): address by GID.
                a.ah_attr.is_global = 1;
                a.ah_attr.grh.dgid.raw = remote.gid;
                a.ah_attr.grh.sgid_index = local.gid_index;
                a.ah_attr.grh.hop_limit = 1;
            }
            let m = M::IBV_QP_STATE
                | M::IBV_QP_AV
                | M::IBV_QP_PATH_MTU
                | M::IBV_QP_DEST_QPN
                | M::IBV_QP_RQ_PSN
                | M::IBV_QP_MAX_DEST_RD_ATOMIC
                | M::IBV_QP_MIN_RNR_TIMER;
            (a, m)
        }
        QpStep::Rts => {
            a.qp_state = ibv_qp_state::IBV_QPS_RTS;
            a.sq_psn = local.psn;
            a.timeout = 14;
            a.retry_cnt = 7;
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
            (
                a,
                M::IBV_QP_STATE
                    | M::IBV_QP_SQ_PSN
                    | M::IBV_QP_TIMEOUT
                    | M::IBV_QP_RETRY_CNT
                    | M::IBV_QP_RNR_RETRY
                    | M::IBV_QP_MAX_QP_RD_ATOMIC,
            )
        }
    }
}

struct Device {
    ctx: *mut ibv_context,
    pd: *mut ibv_pd,
    cq: *mut ibv_cq,
}

impl Drop for Device {
    fn drop(&mut self) {
        // SAFETY: created in open(), destroyed once, children (QPs, MRs) already gone.
        unsafe {
            if !self.cq.is_null() {
                ibv_destroy_cq(self.cq);
            }
            if !self.pd.is_null() {
                ibv_dealloc_pd(self.pd);
            }
            if !self.ctx.is_null() {
                ibv_close_device(self.ctx);
            }
        }
    }
}

const PORT: u8 = 1;

fn open(name: &str, cq_depth: i32) -> CommResult<Device> {
    let mut n = 0;
    // SAFETY: device list handling as in rdma_devices; objects checked for NULL.
    unsafe {
        let list = ibv_get_device_list(&mut n);
        if list.is_null() {
            return Err(os_err("ibv_get_device_list"));
        }
        let found = (0..n.max(0) as usize)
            .map(|i| *list.add(i))
            .find(|&d| CStr::from_ptr(ibv_get_device_name(d)).to_str() == Ok(name));
        let ctx = found.map(|d| ibv_open_device(d)).unwrap_or(ptr::null_mut());
        ibv_free_device_list(list);
        if ctx.is_null() {
            return Err(os_err(&format!("ibv_open_device({name})")));
        }
        let mut dev = Device { ctx, pd: ptr::null_mut(), cq: ptr::null_mut() };
        dev.pd = ibv_alloc_pd(ctx);
        if dev.pd.is_null() {
            return Err(os_err("ibv_alloc_pd"));
        }
        dev.cq = ibv_create_cq(ctx, cq_depth, ptr::null_mut(), ptr::null_mut(), 0);
        if dev.cq.is_null() {
            return Err(os_err(&format!("ibv_create_cq({cq_depth} entries)")));
        }
        Ok(dev)
    }
}

fn create_qp(dev: &Device, sq_depth: u32, recv_depth: u32) -> CommResult<*mut ibv_qp> {
    // SAFETY: zeroed init attributes are valid; filled below.
    let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    init.send_cq = dev.cq;
    init.recv_cq = dev.cq;
    init.qp_type = ibv_qp_type::IBV_QPT_RC;
    init.cap.max_send_wr = sq_depth;
    init.cap.max_recv_wr = recv_depth.max(1);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = 64;
    // SAFETY: pd is live.
    let qp = unsafe { ibv_create_qp(dev.pd, &mut init) };
    if qp.is_null() {
        return Err(os_err("ibv_create_qp"));
    }
    Ok(qp)
}

const ACCESS: u32 = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;

/// Register GPU memory: dma-buf first, then a plain registration of the GPU address (works with
/// nvidia-peermem). Err: why neither worked.
fn register_gpu(pd: *mut ibv_pd, addr: u64, len: u64) -> Result<*mut ibv_mr, String> {
    let dmabuf = match crate::gpu::dmabuf_fd(addr, len) {
        Ok(fd) => {
            // SAFETY: fd is a dma-buf of exactly [addr, addr+len); iova = addr keeps GPU
            // addresses valid as RDMA addresses.
            let mr = unsafe { ibv_reg_dmabuf_mr(pd, 0, len as usize, addr, fd, ACCESS as i32) };
            let e = std::io::Error::last_os_error();
            // SAFETY: closing our copy of the descriptor; the MR keeps its own reference.
            unsafe { libc::close(fd) };
            if !mr.is_null() {
                return Ok(mr);
            }
            format!("ibv_reg_dmabuf_mr: {e}")
        }
        Err(e) => format!("dma-buf export: {e}"),
    };
    // SAFETY: registering a device address; the driver refuses it unless peer memory works.
    let mr = unsafe { ibv_reg_mr(pd, addr as *mut _, len as usize, ACCESS as i32) };
    if mr.is_null() {
        return Err(format!("{dmabuf}; ibv_reg_mr on the GPU address: {}", std::io::Error::last_os_error()));
    }
    Ok(mr)
}

/// The verbs half of the engine: post and poll on real QPs.
pub struct IbvNic {
    /// By engine QP index (rank * lanes + lane); null for ranks on this node.
    qps: Vec<*mut ibv_qp>,
    by_qpn: HashMap<u32, usize>,
    cq: *mut ibv_cq,
}

impl Nic for IbvNic {
    fn post_send(&mut self, qp: usize, w: &WorkRequest) -> CommResult<()> {
        let q = *self.qps.get(qp).filter(|q| !q.is_null()).ok_or_else(|| err(format!("no QP {qp}")))?;
        // Inline data: copied out of this local by ibv_post_send before it returns.
        let value = if let WrOp::WriteU32 { value, .. } = w.op { value } else { 0 };
        // SAFETY: a zeroed work request is valid; every pointer lives across the call (inline
        // data is copied by ibv_post_send before it returns).
        unsafe {
            let mut sge: ibv_sge = std::mem::zeroed();
            let mut wr: ibv_send_wr = std::mem::zeroed();
            wr.wr_id = w.wr_id;
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            let mut flags = if w.signaled { ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
            let (remote, rkey) = match w.op {
                WrOp::Write { local, lkey, len, remote, rkey } => {
                    sge = ibv_sge { addr: local, length: len, lkey };
                    (remote, rkey)
                }
                WrOp::WriteU32 { remote, rkey, .. } => {
                    sge = ibv_sge { addr: &value as *const u32 as u64, length: 4, lkey: 0 };
                    flags |= ibv_send_flags::IBV_SEND_INLINE.0;
                    (remote, rkey)
                }
                WrOp::WriteImm { local, lkey, len, remote, rkey, imm } => {
                    sge = ibv_sge { addr: local, length: len, lkey };
                    wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE_WITH_IMM;
                    wr.imm_data_invalidated_rkey_union.imm_data = imm.to_be();
                    (remote, rkey)
                }
                WrOp::Nop => (0, 0),
            };
            if sge.length > 0 {
                wr.sg_list = &mut sge;
                wr.num_sge = 1;
            }
            wr.send_flags = flags;
            wr.wr.rdma.remote_addr = remote;
            wr.wr.rdma.rkey = rkey;
            let mut bad = ptr::null_mut();
            let rc = ibv_post_send(q, &mut wr, &mut bad);
            if rc != 0 {
                return Err(err(format!("ibv_post_send on QP {qp}: {}", std::io::Error::from_raw_os_error(rc))));
            }
        }
        Ok(())
    }

    fn post_recv(&mut self, qp: usize, n: u32) -> CommResult<()> {
        let q = *self.qps.get(qp).filter(|q| !q.is_null()).ok_or_else(|| err(format!("no QP {qp}")))?;
        for _ in 0..n {
            // SAFETY: a receive with no scatter list only catches an immediate.
            let rc = unsafe {
                let mut wr: ibv_recv_wr = std::mem::zeroed();
                let mut bad = ptr::null_mut();
                ibv_post_recv(q, &mut wr, &mut bad)
            };
            if rc != 0 {
                return Err(err(format!("ibv_post_recv on QP {qp}: {}", std::io::Error::from_raw_os_error(rc))));
            }
        }
        Ok(())
    }

    fn poll(&mut self, out: &mut Vec<Completion>) -> CommResult<()> {
        // SAFETY: wc has room for 32 entries; the CQ is live.
        let mut wc: [ibv_wc; 32] = unsafe { std::mem::zeroed() };
        let n = unsafe { ibv_poll_cq(self.cq, 32, wc.as_mut_ptr()) };
        if n < 0 {
            return Err(err("ibv_poll_cq failed"));
        }
        for c in &wc[..n as usize] {
            let qp =
                *self.by_qpn.get(&c.qp_num).ok_or_else(|| err(format!("completion for unknown QP {}", c.qp_num)))?;
            let error = (c.status != ibv_wc_status::IBV_WC_SUCCESS).then(|| {
                // SAFETY: ibv_wc_status_str returns a static string.
                let s = unsafe { CStr::from_ptr(ibv_wc_status_str(c.status)) };
                format!("{} (vendor error {:#x})", s.to_string_lossy(), c.vendor_err)
            });
            let kind = if c.opcode == ibv_wc_opcode::IBV_WC_RECV_RDMA_WITH_IMM {
                // SAFETY: set by the NIC for this opcode.
                CompletionKind::RecvImm { imm: u32::from_be(unsafe { c.imm_data_invalidated_rkey_union.imm_data }) }
            } else {
                CompletionKind::Send { wr_id: c.wr_id }
            };
            out.push(Completion { qp, kind, error });
        }
        Ok(())
    }
}

/// The staged path's memory operations: copies and flag writes on one CUDA stream, completed in
/// order; CPU access to the pinned staging area by pointer.
pub struct CudaMem {
    device: u32,
    stream: Option<cust::stream::Stream>,
    events: VecDeque<cust::event::Event>,
    issued: u64,
    done: u64,
}

impl CudaMem {
    /// A staging stream on GPU `device`, used from the calling thread.
    pub fn new(device: u32) -> CommResult<Self> {
        crate::gpu::Gpu::new(device)?;
        let s = cust::stream::Stream::new(cust::stream::StreamFlags::NON_BLOCKING, None)
            .map_err(|e| err(format!("creating the staging stream: {e}")))?;
        Ok(Self { device, stream: Some(s), events: VecDeque::new(), issued: 0, done: 0 })
    }

    fn stream(&self) -> CommResult<&cust::stream::Stream> {
        self.stream.as_ref().ok_or_else(|| err("CUDA stream used before the proxy thread started"))
    }

    fn record(&mut self) -> CommResult<u64> {
        let stream = self.stream()?;
        let e = cust::event::Event::new(cust::event::EventFlags::DISABLE_TIMING)
            .and_then(|e| e.record(stream).map(|_| e))
            .map_err(|e| err(format!("recording a staging event: {e}")))?;
        self.events.push_back(e);
        self.issued += 1;
        Ok(self.issued - 1)
    }
}

impl Mem for CudaMem {
    fn copy(&mut self, dst: u64, src: u64, len: u64) -> CommResult<u64> {
        // SAFETY: dst/src were resolved against registered buffers or the staging area.
        let r = unsafe { cust_raw::cuMemcpyAsync(dst, src, len as usize, self.stream()?.as_inner()) };
        crate::gpu::check_raw("cuMemcpyAsync", r)?;
        self.record()
    }
    fn set_u32(&mut self, dst: u64, value: u32) -> CommResult<u64> {
        // SAFETY: dst is a resolved 4-byte flag.
        let r = unsafe { cust_raw::cuMemsetD32Async(dst, value, 1, self.stream()?.as_inner()) };
        crate::gpu::check_raw("cuMemsetD32Async", r)?;
        self.record()
    }
    fn done(&mut self) -> CommResult<u64> {
        while let Some(e) = self.events.front() {
            match e.query() {
                Ok(cust::event::EventStatus::Ready) => {
                    self.events.pop_front();
                    self.done += 1;
                }
                Ok(_) => break,
                Err(e) => return Err(err(format!("staging copy failed: {e}"))),
            }
        }
        Ok(self.done)
    }
    fn write_host(&mut self, addr: u64, data: &[u8]) {
        // SAFETY: addr lies in the pinned staging area (the engine computes it from its base).
        unsafe { ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) }
    }
    fn read_host(&self, addr: u64, out: &mut [u8]) {
        // SAFETY: as above; the NIC may write concurrently, so read volatile-ish via a copy.
        unsafe { ptr::copy_nonoverlapping(addr as *const u8, out.as_mut_ptr(), out.len()) }
    }
}

/// The verbs transport (see the module docs).
pub struct VerbsTransport {
    engine: Engine,
    nic: IbvNic,
    mem: CudaMem,
    mrs: Vec<*mut ibv_mr>,
    _staging: Option<crate::gpu::MappedBuffer<u64>>,
    /// Dropped after `drop` destroyed the QPs and MRs (its own drop frees CQ, PD, context).
    _dev: Device,
}

// SAFETY: verbs objects are used only from the proxy thread after construction.
unsafe impl Send for VerbsTransport {}

impl VerbsTransport {
    /// Collective: open the NIC, register `regions` (GPU buffers, by FIFO buffer id), connect
    /// `lanes` RC QPs to every rank on another node, exchange regions. Errors name the verb.
    pub fn connect(
        world: &World,
        boot: &mut Bootstrap,
        regions: &[(u64, u64)],
        opts: &VerbsOptions,
    ) -> CommResult<VerbsTransport> {
        let names = rdma_devices();
        if names.is_empty() {
            return Err(err("no RDMA device found (ibv_get_device_list listed none): use the emulated NIC, or run on a node with a ConnectX/EFA NIC"));
        }
        let mut cfg = opts.engine.clone();
        cfg.validate()?;
        let name = opts.device.clone().unwrap_or_else(|| names[0].clone());
        let w = world.world_size as usize;
        let lanes = cfg.lanes as usize;
        let cq_depth = (w * lanes * (cfg.sq_depth as usize + opts.staged.slots as usize) + 64).min(1 << 20) as i32;
        let dev = open(&name, cq_depth)?;
        let mut mrs = Vec::new();
        let mut local: Vec<LocalRegion> = Vec::new();
        let mut why_not_direct = None;
        for &(addr, len) in regions {
            match register_gpu(dev.pd, addr, len) {
                Ok(mr) => {
                    mrs.push(mr);
                    // SAFETY: mr is a live registration.
                    local.push((addr, len, unsafe { (*mr).lkey }));
                }
                Err(e) => {
                    why_not_direct.get_or_insert(e);
                    local.push((addr, len, 0));
                }
            }
        }
        // Staged on every rank if any rank cannot register GPU memory.
        let direct = !opts.force_staged && why_not_direct.is_none();
        let votes = boot.all_gather(&[direct as u8])?;
        let staged = votes.iter().any(|v| v.first() != Some(&1));
        if staged {
            if let Some(e) = &why_not_direct {
                eprintln!("mkernel: rank {}: GPU memory not registrable ({e}); using host-staged RDMA", world.rank);
            }
            cfg.staged = Some(opts.staged);
        }
        let mut staging_buf = None;
        let mut staging = None;
        let mut my_staging = RemoteRegion::default();
        if let Some(s) = cfg.staged {
            let bytes = s.total(world.world_size);
            let gpu = crate::gpu::Gpu::new(world.device)?;
            let buf = gpu.mapped::<u64>(bytes.div_ceil(8) as usize)?;
            let addr = buf.host_ptr() as u64;
            // SAFETY: pinned host memory owned by `buf`, alive as long as the transport.
            let mr = unsafe { ibv_reg_mr(dev.pd, addr as *mut _, bytes as usize, ACCESS as i32) };
            if mr.is_null() {
                return Err(os_err(&format!("ibv_reg_mr of {bytes} bytes of pinned staging memory")));
            }
            mrs.push(mr);
            // SAFETY: live registration.
            let (lkey, rkey) = unsafe { ((*mr).lkey, (*mr).rkey) };
            staging = Some(Staging { local: (addr, bytes, lkey), remote: Vec::new() });
            my_staging = RemoteRegion { addr, len: bytes, rkey, _pad: 0 };
            staging_buf = Some(buf);
        }
        let mut port: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; port_attr is writable.
        if unsafe { ___ibv_query_port(dev.ctx, PORT, &mut port) } != 0 {
            return Err(os_err("ibv_query_port"));
        }
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: as above; GID index 0 exists on every active port.
        if unsafe { ibv_query_gid(dev.ctx, PORT, 0, &mut gid) } != 0 {
            return Err(os_err("ibv_query_gid"));
        }
        let recv_depth = cfg.staged.map_or(0, |s| s.slots);
        let mut qps = vec![ptr::null_mut(); w * lanes];
        let mut infos = vec![QpInfo::default(); w * lanes];
        let mut by_qpn = HashMap::new();
        for r in (0..world.world_size).filter(|&r| !world.is_local(r)) {
            for lane in 0..lanes {
                let i = r as usize * lanes + lane;
                let qp = create_qp(&dev, cfg.sq_depth, recv_depth)?;
                qps[i] = qp;
                // SAFETY: qp is live; gid is plain bytes.
                let qpn = unsafe { (*qp).qp_num };
                by_qpn.insert(qpn, i);
                infos[i] = QpInfo {
                    lid: port.lid,
                    port: PORT,
                    gid_index: 0,
                    qpn,
                    psn: 0x1000 + i as u32,
                    _pad: 0,
                    gid: unsafe { gid.raw },
                };
            }
        }
        // Blob: my QPs aimed at every (rank, lane), my staging area, my regions.
        let mut blob: Vec<u8> = bytemuck::cast_slice(&infos).to_vec();
        blob.extend_from_slice(bytemuck::bytes_of(&my_staging));
        for (i, &(addr, len)) in regions.iter().enumerate() {
            let rkey = if cfg.staged.is_none() { unsafe { (*mrs[i]).rkey } } else { 0 };
            blob.extend_from_slice(bytemuck::bytes_of(&RemoteRegion { addr, len, rkey, _pad: 0 }));
        }
        let all = boot.all_gather(&blob)?;
        let qp_bytes = 32 * w * lanes;
        let mut remote = Vec::new();
        for (r, b) in all.iter().enumerate() {
            if b.len() < qp_bytes + 24 {
                return Err(err(format!("rank {r} sent a {}-byte verbs blob", b.len())));
            }
            if let Some(st) = staging.as_mut() {
                st.remote.push(bytemuck::pod_read_unaligned(&b[qp_bytes..qp_bytes + 24]));
            }
            remote.push(b[qp_bytes + 24..].chunks_exact(24).map(bytemuck::pod_read_unaligned).collect());
            if world.is_local(r as u32) {
                continue;
            }
            for lane in 0..lanes {
                let theirs_at = 32 * (world.rank as usize * lanes + lane);
                let theirs: QpInfo = bytemuck::pod_read_unaligned(&b[theirs_at..theirs_at + 32]);
                let i = r * lanes + lane;
                for step in [QpStep::Init, QpStep::Rtr, QpStep::Rts] {
                    let (mut a, m) = qp_attr(step, &infos[i], &theirs);
                    // SAFETY: live QP, attributes built for this transition.
                    if unsafe { ibv_modify_qp(qps[i], &mut a, m.0 as i32) } != 0 {
                        return Err(os_err(&format!("ibv_modify_qp({step:?}) for rank {r} lane {lane}")));
                    }
                }
            }
        }
        let remote_ranks = (0..world.world_size).map(|r| !world.is_local(r)).collect();
        let mut engine = Engine::new(cfg, world.rank, remote_ranks, local, remote, staging)?;
        let mut nic = IbvNic { qps, by_qpn, cq: dev.cq };
        let mut mem = CudaMem { device: world.device, stream: None, events: VecDeque::new(), issued: 0, done: 0 };
        engine.start(&mut nic, &mut mem)?;
        boot.barrier()?;
        Ok(VerbsTransport { engine, nic, mem, mrs, _staging: staging_buf, _dev: dev })
    }

    /// Whether this transport runs host-staged.
    pub fn staged(&self) -> bool {
        self.engine.staged()
    }
}

impl Transport for VerbsTransport {
    fn name(&self) -> &'static str {
        "verbs"
    }

    fn on_proxy_thread(&mut self) -> CommResult<()> {
        self.mem = CudaMem::new(self.mem.device)?;
        Ok(())
    }

    fn post(&mut self, cmds: &[FifoCmd]) -> CommResult<()> {
        self.engine.post(cmds, &mut self.nic, &mut self.mem)
    }

    fn progress(&mut self) -> CommResult<()> {
        self.engine.progress(&mut self.nic, &mut self.mem)
    }

    fn flush(&mut self) -> CommResult<()> {
        self.engine.flush(&mut self.nic, &mut self.mem)
    }
}

impl Drop for VerbsTransport {
    fn drop(&mut self) {
        // SAFETY: children before parents: QPs and MRs, then (Device's drop) CQ, PD, context.
        unsafe {
            for &qp in self.nic.qps.iter().filter(|q| !q.is_null()) {
                ibv_destroy_qp(qp);
            }
            for &mr in &self.mrs {
                ibv_dereg_mr(mr);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rc_transitions_set_the_required_attributes() {
        let me = QpInfo { lid: 3, port: 1, gid_index: 0, qpn: 77, psn: 100, _pad: 0, gid: [0; 16] };
        let peer = QpInfo { lid: 9, port: 1, gid_index: 0, qpn: 88, psn: 200, _pad: 0, gid: [1; 16] };
        let (a, m) = qp_attr(QpStep::Init, &me, &peer);
        assert_eq!((a.qp_state, a.port_num), (ibv_qp_state::IBV_QPS_INIT, 1));
        assert!(m.0 & ibv_qp_attr_mask::IBV_QP_ACCESS_FLAGS.0 != 0);
        let (a, m) = qp_attr(QpStep::Rtr, &me, &peer);
        assert_eq!((a.dest_qp_num, a.rq_psn, a.ah_attr.dlid, a.ah_attr.is_global), (88, 200, 9, 1));
        assert!(m.0 & ibv_qp_attr_mask::IBV_QP_AV.0 != 0 && m.0 & ibv_qp_attr_mask::IBV_QP_DEST_QPN.0 != 0);
        let (a, _) = qp_attr(QpStep::Rts, &me, &peer);
        assert_eq!((a.qp_state, a.sq_psn), (ibv_qp_state::IBV_QPS_RTS, 100));
    }

    #[test]
    fn qp_info_round_trips_through_bytes() {
        let q = QpInfo { lid: 0x1234, port: 1, gid_index: 3, qpn: 0xabcdef, psn: 7, _pad: 0, gid: [9; 16] };
        let back: QpInfo = bytemuck::pod_read_unaligned(bytemuck::bytes_of(&q));
        assert_eq!(q, back);
    }

    #[test]
    fn no_device_is_a_clear_error() {
        if !rdma_devices().is_empty() {
            return; // a real NIC: covered by the multi-node runs instead
        }
        let w = World::single(0);
        let mut boot = Bootstrap::connect(&w, Duration::from_secs(1)).unwrap();
        let e = VerbsTransport::connect(&w, &mut boot, &[], &VerbsOptions::default())
            .err()
            .expect("no device must be an error");
        assert!(e.to_string().contains("no RDMA device found"), "{e}");
    }

    #[test]
    fn options_from_env_name_the_variable() {
        // Only this test touches MKERNEL_VERBS_LANES.
        std::env::set_var("MKERNEL_VERBS_LANES", "many");
        let e = VerbsOptions::from_env().unwrap_err().to_string();
        std::env::remove_var("MKERNEL_VERBS_LANES");
        assert!(e.contains("MKERNEL_VERBS_LANES"), "{e}");
    }
}
