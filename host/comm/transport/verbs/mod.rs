//! RDMA verbs transport through `rdma-sys`: reliable-connected QPs on InfiniBand / RoCE
//! (ConnectX-7) and SRD QPs on AWS EFA ([`efa`]), over one or several NICs per rank ([`rails`]).
//!
//! The protocol (messages, lanes, flags, selective signalling, the host-staged path, the
//! receiver-side arrival counting that unordered SRD needs) lives in [`engine`] and
//! [`arrival`] and is tested against a simulated fabric in RC and SRD modes; this module binds
//! it to the verbs:
//! - Bring-up ([`VerbsTransport::connect`], collective): choose the rails (a name override, else
//!   the NICs nearest the GPU in sysfs), open each, a protection domain and a completion queue
//!   per NIC, every object owned by an [`objects::Obj`] that holds its parents, so a failure
//!   anywhere drops what was made, children first. EFA devices (`efadv_query_device` answers)
//!   get SRD QPs and unordered delivery; others RC. GPU buffers are registered on every NIC, by
//!   dma-buf (`cuMemGetHandleForAddressRange` + `ibv_reg_dmabuf_mr`) or else `ibv_reg_mr` on
//!   the GPU address (nvidia-peermem). If any rank can register neither (or
//!   `MKERNEL_VERBS_STAGED=1`), every rank switches to host-staged mode. A pinned host staging
//!   area is registered when the engine needs a slot ring (staged, or SRD flag records). QP
//!   numbers, GIDs and regions travel through the bootstrap; RC QPs go INIT -> RTR -> RTS
//!   towards their peer, SRD QPs alone, with an address handle per peer QP; receives are posted
//!   before the closing barrier.
//! - [`IbvNic`]: `ibv_post_send` (RC) or the `ibv_wr_*` API (SRD), `ibv_post_recv`,
//!   `ibv_poll_cq` over every NIC's CQ.
//! - [`CudaMem`]: the receiving proxy's copies and flag writes on one CUDA stream, completion by
//!   events.
//!
//! What has run: device discovery and its error where no RDMA device exists (our GPU machines
//! have none; soft-RoCE cannot be loaded there), NIC choice from a sysfs fixture, the RC and SRD
//! attribute logic, the efadv layouts against the installed header, and the whole engine on the
//! simulated fabric. What has NOT run on a NIC: every verbs call of [`IbvNic`] and `connect`,
//! RC or SRD, and [`CudaMem`] as a receiver (see the README's first-run checklist).
pub mod arrival;
pub mod efa;
pub mod engine;
#[cfg(test)]
mod engine_tests;
#[cfg(test)]
mod fuzz;
pub mod objects;
pub mod rails;
pub mod rc;
#[cfg(test)]
mod sim;

pub use engine::{Delivery, EngineConfig, Region, RemoteRegion, StagedConfig};

use crate::abi::FifoCmd;
use crate::comm::bootstrap::Bootstrap;
use crate::comm::error::{CommError, CommResult};
use crate::comm::transport::Transport;
use crate::comm::world::World;
use engine::{err, Completion, CompletionKind, Engine, Mem, Nic, Staging, WorkRequest, WrOp};
use objects::{Ah, Context, Cq, Mr, Pd, Qp};
use rails::Rail;
use rc::{qp_attr, QpInfo, QpStep};
use rdma_sys::*;
use std::collections::{HashMap, VecDeque};
use std::ffi::CStr;
use std::path::PathBuf;
use std::ptr;
use std::sync::Arc;

fn os_err(call: &str) -> CommError {
    err(format!("{call} failed: {}", std::io::Error::last_os_error()))
}

/// How to bring up the verbs transport.
#[derive(Clone, Debug)]
pub struct VerbsOptions {
    /// RDMA device name(s), comma-separated: the rails, overriding the topology's choice.
    pub device: Option<String>,
    /// Most NICs a rank stripes over when the topology chooses.
    pub max_rails: usize,
    /// Where sysfs is (`/sys`; tests point it at a fixture).
    pub sysfs: PathBuf,
    /// Use host staging even where GPU memory could be registered.
    pub force_staged: bool,
    /// Index of the source GID in the port's table (RoCE v2 usually wants one past 0; see
    /// `show_gids`). InfiniBand and EFA ignore it.
    pub gid_index: u8,
    /// Staging geometry when staged.
    pub staged: StagedConfig,
    /// The engine's tuning (`staged`, `delivery` and `rails` are set by `connect`).
    pub engine: EngineConfig,
}

impl Default for VerbsOptions {
    fn default() -> Self {
        Self {
            device: None,
            max_rails: 4,
            sysfs: rails::sysfs(),
            force_staged: false,
            gid_index: 0,
            staged: StagedConfig { slots: 16, slot_bytes: 1 << 20 },
            engine: EngineConfig::default(),
        }
    }
}

impl VerbsOptions {
    /// Defaults overridden by `MKERNEL_IB_DEVICE` (names, comma-separated),
    /// `MKERNEL_VERBS_RAILS`, `MKERNEL_VERBS_LANES`, `MKERNEL_IB_GID_INDEX` and
    /// `MKERNEL_VERBS_STAGED=1`.
    pub fn from_env() -> CommResult<Self> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// As [`VerbsOptions::from_env`], reading the variables through `var`.
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> CommResult<Self> {
        let mut o = Self {
            device: var("MKERNEL_IB_DEVICE"),
            force_staged: var("MKERNEL_VERBS_STAGED").is_some_and(|v| v == "1"),
            ..Self::default()
        };
        if let Some(v) = var("MKERNEL_VERBS_LANES") {
            o.engine.lanes = v.parse().map_err(|_| CommError::Env {
                var: "MKERNEL_VERBS_LANES",
                rule: format!("`{v}`: a number of QPs per peer, 1..=16"),
            })?;
        }
        if let Some(v) = var("MKERNEL_IB_GID_INDEX") {
            o.gid_index = v.parse().map_err(|_| CommError::Env {
                var: "MKERNEL_IB_GID_INDEX",
                rule: format!("`{v}`: an index in the port's GID table, 0..=255"),
            })?;
        }
        if let Some(v) = var("MKERNEL_VERBS_RAILS") {
            o.max_rails = v.parse().ok().filter(|n| (1..=16).contains(n)).ok_or_else(|| CommError::Env {
                var: "MKERNEL_VERBS_RAILS",
                rule: format!("`{v}`: the most NICs per rank, 1..=16"),
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

fn no_device() -> CommError {
    err("no RDMA device found (ibv_get_device_list listed none): use the emulated NIC, or run on a node with a ConnectX/EFA NIC")
}

/// The NICs a rank on the GPU with PCI `gpu_bus_id` would use among `present` (verbs names):
/// the override, else the topology's choice among the present ones, else the first present.
pub fn plan_rails(opts: &VerbsOptions, gpu_bus_id: Option<&str>, present: &[String]) -> CommResult<Vec<Rail>> {
    if present.is_empty() {
        return Err(no_device());
    }
    if let Some(names) = &opts.device {
        return rails::named(names, present);
    }
    let gpu = gpu_bus_id.and_then(|b| rails::pci_place(&opts.sysfs, b));
    let known: Vec<rails::NicPlace> =
        rails::nics(&opts.sysfs).into_iter().filter(|n| present.contains(&n.name)).collect();
    let chosen = rails::choose(gpu.as_ref(), &known, opts.max_rails);
    if chosen.is_empty() {
        return Ok(vec![Rail { name: present[0].clone(), affinity: rails::Affinity::Remote }]);
    }
    Ok(chosen)
}

const PORT: u8 = 1;

/// One NIC, opened: context, PD, CQ and its address.
struct RailDev {
    name: String,
    ctx: Arc<Context>,
    pd: Arc<Pd>,
    cq: Arc<Cq>,
    lid: u16,
    gid_index: u8,
    gid: [u8; 16],
    efa: Option<efa::EfaCaps>,
}

fn open_rail(name: &str, cq_depth: i32, gid_index: u8) -> CommResult<RailDev> {
    let mut n = 0;
    // SAFETY: device list handling as in rdma_devices; the context is owned below.
    let raw = unsafe {
        let list = ibv_get_device_list(&mut n);
        if list.is_null() {
            return Err(os_err("ibv_get_device_list"));
        }
        let found = (0..n.max(0) as usize)
            .map(|i| *list.add(i))
            .find(|&d| !d.is_null() && CStr::from_ptr(ibv_get_device_name(d)).to_str() == Ok(name));
        let ctx = found.map(|d| ibv_open_device(d)).unwrap_or(ptr::null_mut());
        ibv_free_device_list(list);
        ctx
    };
    // SAFETY: the context is fresh, closed once by its owner.
    let ctx = Arc::new(unsafe { Context::new(raw, "ibv_open_device", |p| ibv_close_device(p), ())? });
    // SAFETY: the PD is fresh, deallocated once by its owner, which holds the context.
    let pd = unsafe { Pd::new(ibv_alloc_pd(ctx.as_ptr()), "ibv_alloc_pd", |p| ibv_dealloc_pd(p), ctx.clone())? };
    // SAFETY: the CQ is fresh, destroyed once by its owner, which holds the context.
    let cq = unsafe {
        let raw = ibv_create_cq(ctx.as_ptr(), cq_depth, ptr::null_mut(), ptr::null_mut(), 0);
        Cq::new(raw, "ibv_create_cq", |p| ibv_destroy_cq(p), ctx.clone())?
    };
    // SAFETY: plain data, written by the verbs below.
    let mut port: ibv_port_attr = unsafe { std::mem::zeroed() };
    // SAFETY: ctx is open; port is writable.
    if unsafe { ___ibv_query_port(ctx.as_ptr(), PORT, &mut port) } != 0 {
        return Err(os_err(&format!("ibv_query_port({name} port {PORT})")));
    }
    // SAFETY: plain data.
    let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
    // SAFETY: as above; an index past the table is an error return, not a fault.
    if unsafe { ibv_query_gid(ctx.as_ptr(), PORT, gid_index as i32, &mut gid) } != 0 {
        return Err(os_err(&format!("ibv_query_gid({name} port {PORT} index {gid_index}, MKERNEL_IB_GID_INDEX)")));
    }
    let efa = efa::query(&ctx)?;
    // SAFETY: the GID union is plain bytes.
    let gid = unsafe { gid.raw };
    Ok(RailDev { name: name.into(), ctx, pd: Arc::new(pd), cq: Arc::new(cq), lid: port.lid, gid_index, gid, efa })
}

fn create_rc_qp(d: &RailDev, sq_depth: u32, recv_depth: u32) -> CommResult<Qp> {
    // SAFETY: zeroed init attributes are valid; filled below.
    let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    init.send_cq = d.cq.as_ptr();
    init.recv_cq = d.cq.as_ptr();
    init.qp_type = ibv_qp_type::IBV_QPT_RC;
    init.cap.max_send_wr = sq_depth;
    init.cap.max_recv_wr = recv_depth.max(1);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = 64;
    // SAFETY: pd is live; the QP is owned below with its PD and CQ.
    unsafe {
        let raw = ibv_create_qp(d.pd.as_ptr(), &mut init);
        Qp::new(raw, "ibv_create_qp(RC)", |p| ibv_destroy_qp(p), (d.pd.clone(), d.cq.clone()))
    }
}

fn create_ah(d: &RailDev, gid: [u8; 16]) -> CommResult<Ah> {
    // SAFETY: plain data; zero is valid.
    let mut a: ibv_ah_attr = unsafe { std::mem::zeroed() };
    a.is_global = 1;
    a.port_num = PORT;
    a.grh.dgid.raw = gid;
    a.grh.hop_limit = 255;
    // SAFETY: pd is live; the AH is owned below with its PD.
    unsafe {
        let raw = ibv_create_ah(d.pd.as_ptr(), &mut a);
        Ah::new(raw, "ibv_create_ah", |p| ibv_destroy_ah(p), d.pd.clone())
    }
}

const ACCESS: u32 = ibv_access_flags::IBV_ACCESS_LOCAL_WRITE.0 | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE.0;

/// Register GPU memory: dma-buf first, then a plain registration of the GPU address (works with
/// nvidia-peermem). Err: why neither worked.
fn register_gpu(pd: &Arc<Pd>, addr: u64, len: u64) -> Result<Mr, String> {
    let dmabuf = match crate::gpu::dmabuf_fd(addr, len) {
        Ok(fd) => {
            // SAFETY: fd is a dma-buf of exactly [addr, addr+len); iova = addr keeps GPU
            // addresses valid as RDMA addresses.
            let mr = unsafe { ibv_reg_dmabuf_mr(pd.as_ptr(), 0, len as usize, addr, fd, ACCESS as i32) };
            let e = std::io::Error::last_os_error();
            // SAFETY: closing our copy of the descriptor; the MR keeps its own reference.
            unsafe { libc::close(fd) };
            // SAFETY: a fresh registration, deregistered once by its owner.
            match unsafe { Mr::new(mr, "ibv_reg_dmabuf_mr", |p| ibv_dereg_mr(p), pd.clone()) } {
                Ok(mr) => return Ok(mr),
                Err(_) => format!("ibv_reg_dmabuf_mr: {e}"),
            }
        }
        Err(e) => format!("dma-buf export: {e}"),
    };
    // SAFETY: registering a device address; the driver refuses it unless peer memory works.
    let mr = unsafe { ibv_reg_mr(pd.as_ptr(), addr as *mut _, len as usize, ACCESS as i32) };
    // SAFETY: as above.
    unsafe { Mr::new(mr, "ibv_reg_mr", |p| ibv_dereg_mr(p), pd.clone()) }
        .map_err(|e| format!("{dmabuf}; ibv_reg_mr on the GPU address: {e}"))
}

/// A QP as the NIC half sees it.
enum Wire {
    /// Connected to one peer QP.
    Rc(Qp),
    /// SRD: reaches the peer QP through an address handle.
    Srd { qp: Qp, ah: Ah, remote_qpn: u32 },
}

impl Wire {
    fn qp(&self) -> &Qp {
        match self {
            Wire::Rc(qp) | Wire::Srd { qp, .. } => qp,
        }
    }
}

/// The verbs half of the engine: post and poll on real QPs of every rail.
pub struct IbvNic {
    /// By engine QP index (rank * lanes + lane); None for ranks on this node.
    qps: Vec<Option<Wire>>,
    /// (rail, QP number) -> engine QP index.
    by_qpn: HashMap<(usize, u32), usize>,
    cqs: Vec<Arc<Cq>>,
}

// SAFETY: the verbs objects are used only from the proxy thread after construction.
unsafe impl Send for IbvNic {}

impl IbvNic {
    fn wire(&self, qp: usize) -> CommResult<&Wire> {
        self.qps.get(qp).and_then(|w| w.as_ref()).ok_or_else(|| err(format!("no QP {qp}")))
    }
}

impl Nic for IbvNic {
    fn post_send(&mut self, qp: usize, w: &WorkRequest) -> CommResult<()> {
        match self.wire(qp)? {
            Wire::Rc(q) => post_rc(q, qp, w),
            Wire::Srd { qp: q, ah, remote_qpn } => post_srd(q, ah, *remote_qpn, qp, w),
        }
    }

    fn post_recv(&mut self, qp: usize, n: u32) -> CommResult<()> {
        let q = self.wire(qp)?.qp().as_ptr();
        for _ in 0..n {
            // SAFETY: a receive with no scatter list only catches an immediate; the QP is live.
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
        for (rail, cq) in self.cqs.iter().enumerate() {
            // SAFETY: plain data; room for 32 entries.
            let mut wc: [ibv_wc; 32] = unsafe { std::mem::zeroed() };
            // SAFETY: the CQ is live; wc has 32 entries.
            let n = unsafe { ibv_poll_cq(cq.as_ptr(), 32, wc.as_mut_ptr()) };
            if n < 0 {
                return Err(err(format!("ibv_poll_cq on NIC {rail} failed")));
            }
            for c in &wc[..n as usize] {
                let qp = *self
                    .by_qpn
                    .get(&(rail, c.qp_num))
                    .ok_or_else(|| err(format!("completion for unknown QP {} on NIC {rail}", c.qp_num)))?;
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
        }
        Ok(())
    }
}

fn post_rc(q: &Qp, qp: usize, w: &WorkRequest) -> CommResult<()> {
    // Inline data: copied out of this local by ibv_post_send before it returns.
    let value = if let WrOp::WriteU32 { value, .. } = w.op { value } else { 0 };
    // SAFETY: a zeroed work request is valid; every pointer lives across the call (inline data
    // is copied by ibv_post_send before it returns); the QP is live.
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
        let rc = ibv_post_send(q.as_ptr(), &mut wr, &mut bad);
        if rc != 0 {
            return Err(err(format!("ibv_post_send on QP {qp}: {}", std::io::Error::from_raw_os_error(rc))));
        }
    }
    Ok(())
}

fn post_srd(q: &Qp, ah: &Ah, remote_qpn: u32, qp: usize, w: &WorkRequest) -> CommResult<()> {
    let mut value = if let WrOp::WriteU32 { value, .. } = w.op { value } else { 0 };
    // SAFETY: the QP was made by efadv_create_qp_ex with the extended send ops, so it has a
    // qp_ex; the AH is live; inline data is copied before ibv_wr_complete returns.
    unsafe {
        let x = ibv_qp_to_qp_ex(q.as_ptr());
        if x.is_null() {
            return Err(err(format!("QP {qp}: ibv_qp_to_qp_ex gave no extended QP")));
        }
        ibv_wr_start(x);
        (*x).wr_id = w.wr_id;
        (*x).wr_flags = if w.signaled { ibv_send_flags::IBV_SEND_SIGNALED.0 } else { 0 };
        match w.op {
            WrOp::Write { local, lkey, len, remote, rkey } => {
                ibv_wr_rdma_write(x, rkey, remote);
                ibv_wr_set_sge(x, lkey, local, len);
            }
            WrOp::WriteImm { local, lkey, len, remote, rkey, imm } => {
                ibv_wr_rdma_write_imm(x, rkey, remote, imm.to_be());
                ibv_wr_set_sge(x, lkey, local, len);
            }
            WrOp::WriteU32 { remote, rkey, .. } => {
                (*x).wr_flags |= ibv_send_flags::IBV_SEND_INLINE.0;
                ibv_wr_rdma_write(x, rkey, remote);
                ibv_wr_set_inline_data(x, &mut value as *mut u32 as *mut _, 4);
            }
            WrOp::Nop => {
                ibv_wr_abort(x);
                return Err(err(format!("QP {qp}: zero-length writes are not used on SRD")));
            }
        }
        ibv_wr_set_ud_addr(x, ah.as_ptr(), remote_qpn, efa::QKEY);
        let rc = ibv_wr_complete(x);
        if rc != 0 {
            return Err(err(format!("ibv_wr_complete on SRD QP {qp}: {}", std::io::Error::from_raw_os_error(rc))));
        }
    }
    Ok(())
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
        // A stream memory operation, not a memset kernel: it must not wait behind the kernel
        // that polls this flag.
        // SAFETY: dst is a resolved 4-byte flag.
        unsafe { crate::gpu::write_u32_async(self.stream()?, dst, value)? };
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

/// The verbs transport (see the module docs). Fields drop in order: QPs and AHs (in `nic`),
/// then registrations, then the staging memory they cover; contexts, PDs and CQs go with the
/// last `Arc` that holds them.
pub struct VerbsTransport {
    engine: Engine,
    nic: IbvNic,
    mem: CudaMem,
    _mrs: Vec<Mr>,
    _staging_mrs: Vec<Mr>,
    _staging: Option<crate::gpu::MappedBuffer<u64>>,
    rails: Vec<Rail>,
    srd: bool,
    /// Commands posted since the engine last had nothing that may read a source.
    unreleased: u64,
}

// SAFETY: verbs objects are used only from the proxy thread after construction.
unsafe impl Send for VerbsTransport {}

/// Bytes of one rank's bring-up blob: its QPs aimed at every (rank, lane), its staging area and
/// its regions, each once per rail.
fn blob_len(world: usize, lanes: usize, rails: usize, regions: usize) -> usize {
    32 * world * lanes + 24 * rails * (1 + regions)
}

impl VerbsTransport {
    /// Collective: choose and open the NICs, register `regions` (GPU buffers, by FIFO buffer
    /// id) on each, make `lanes` QPs (RC, or SRD on EFA) for every rank on another node,
    /// exchange addresses and regions, connect. Errors name the verb and the NIC; whatever was
    /// made before an error is destroyed (children first) on the way out.
    pub fn connect(
        world: &World,
        boot: &mut Bootstrap,
        regions: &[(u64, u64)],
        opts: &VerbsOptions,
    ) -> CommResult<VerbsTransport> {
        let present = rdma_devices();
        if present.is_empty() {
            return Err(no_device());
        }
        let bus = crate::gpu::topology::pci_bus_id(world.device).ok();
        let rails = plan_rails(opts, bus.as_deref(), &present)?;
        let mut cfg = opts.engine.clone();
        cfg.lanes = cfg.lanes.max(rails.len() as u32); // every NIC carries a lane
        cfg.rails = rails.iter().map(|r| r.name.clone()).collect();
        cfg.validate()?;
        let (w, lanes, nr) = (world.world_size as usize, cfg.lanes as usize, rails.len());
        let cq_depth = (w * lanes * (cfg.sq_depth as usize + opts.staged.slots as usize + 64) + 64).min(1 << 20) as i32;
        let devs =
            rails.iter().map(|r| open_rail(&r.name, cq_depth, opts.gid_index)).collect::<CommResult<Vec<_>>>()?;
        let srd = devs[0].efa.is_some();
        if let Some(d) = devs.iter().find(|d| d.efa.is_some() != srd) {
            return Err(err(format!("NICs {} and {} are of different kinds (EFA and not)", devs[0].name, d.name)));
        }
        if srd {
            cfg.delivery = Delivery::Unordered;
        }
        // Register the GPU buffers on every NIC.
        let mut mrs = Vec::new();
        let mut local: Vec<Region> =
            regions.iter().map(|&(addr, len)| Region { addr, len, keys: Vec::new() }).collect();
        let mut rkeys = vec![vec![0u32; nr]; regions.len()];
        let mut why_not_direct = None;
        for (k, d) in devs.iter().enumerate() {
            for (i, &(addr, len)) in regions.iter().enumerate() {
                match register_gpu(&d.pd, addr, len) {
                    Ok(mr) => {
                        let (lkey, rkey) = mr.keys();
                        local[i].keys.push(lkey);
                        rkeys[i][k] = rkey;
                        mrs.push(mr);
                    }
                    Err(e) => {
                        why_not_direct.get_or_insert(format!("{}: {e}", d.name));
                        local[i].keys.push(0);
                    }
                }
            }
        }
        // Every rank must agree: direct or staged, RC or SRD, and the number of rails.
        let direct = !opts.force_staged && why_not_direct.is_none();
        let votes = boot.all_gather(&[direct as u8, srd as u8, nr as u8])?;
        if let Some((r, v)) = votes.iter().enumerate().find(|(_, v)| v.get(1..3) != Some(&[srd as u8, nr as u8][..])) {
            return Err(err(format!(
                "rank {} has {} NIC(s), {}; rank {r} has {:?} (SRD, NICs): every rank needs the same kind and count",
                world.rank,
                nr,
                if srd { "EFA SRD" } else { "RC" },
                v.get(1..3)
            )));
        }
        if votes.iter().any(|v| v.first() != Some(&1)) {
            if let Some(e) = &why_not_direct {
                eprintln!("mkernel: rank {}: GPU memory not registrable ({e}); using host-staged RDMA", world.rank);
            }
            cfg.staged = Some(opts.staged);
        }
        if let Some(d) = devs.iter().find(|d| d.efa.is_some()) {
            let caps = d.efa.expect("found above");
            if let Some(why) = caps.unusable(&d.name, cfg.sq_depth, cfg.recv_depth(0), cfg.max_msg) {
                return Err(err(why));
            }
        }
        // The staging area, when the engine needs a slot ring. Its registrations are declared
        // after it, so they are dropped first.
        let mut staging_buf = None;
        let mut staging_mrs = Vec::new();
        let mut staging = None;
        let mut my_staging = vec![RemoteRegion::default(); nr];
        if let Some(s) = cfg.ring() {
            let bytes = s.total(world.world_size);
            let gpu = crate::gpu::Gpu::new(world.device)?;
            let buf = gpu.mapped::<u64>(bytes.div_ceil(8) as usize)?;
            let addr = buf.host_ptr() as u64;
            staging_buf = Some(buf);
            let mut keys = Vec::new();
            for (k, d) in devs.iter().enumerate() {
                // SAFETY: pinned host memory owned by `staging_buf`, which outlives the MR.
                let mr = unsafe {
                    let raw = ibv_reg_mr(d.pd.as_ptr(), addr as *mut _, bytes as usize, ACCESS as i32);
                    Mr::new(raw, "ibv_reg_mr(staging)", |p| ibv_dereg_mr(p), d.pd.clone())?
                };
                let (lkey, rkey) = mr.keys();
                keys.push(lkey);
                my_staging[k] = RemoteRegion { addr, len: bytes, rkey, _pad: 0 };
                staging_mrs.push(mr);
            }
            staging = Some(Staging { local: Region { addr, len: bytes, keys }, remote: Vec::new() });
        }
        // QPs: lane l of every remote rank on rail l % rails.
        let mut wires: Vec<Option<Wire>> = (0..w * lanes).map(|_| None).collect();
        let mut qps: Vec<Option<Qp>> = (0..w * lanes).map(|_| None).collect();
        let mut infos = vec![QpInfo::default(); w * lanes];
        let mut by_qpn = HashMap::new();
        for r in (0..world.world_size).filter(|&r| !world.is_local(r)) {
            for lane in 0..cfg.lanes {
                let i = r as usize * lanes + lane as usize;
                let k = lane as usize % nr;
                let d = &devs[k];
                let recv = cfg.recv_depth(lane);
                let qp = match d.efa {
                    Some(c) => efa::create_srd_qp(&d.ctx, &d.pd, &d.cq, PORT, cfg.sq_depth, recv, c.rnr_retry)?,
                    None => create_rc_qp(d, cfg.sq_depth, recv)?,
                };
                by_qpn.insert((k, qp.qpn()), i);
                infos[i] = QpInfo {
                    lid: d.lid,
                    port: PORT,
                    gid_index: d.gid_index,
                    qpn: qp.qpn(),
                    psn: 0x1000 + i as u32,
                    _pad: 0,
                    gid: d.gid,
                };
                qps[i] = Some(qp);
            }
        }
        let mut blob: Vec<u8> = bytemuck::cast_slice(&infos).to_vec();
        blob.extend_from_slice(bytemuck::cast_slice(&my_staging));
        for (i, &(addr, len)) in regions.iter().enumerate() {
            for &rkey in &rkeys[i] {
                let rkey = if cfg.staged.is_none() { rkey } else { 0 };
                blob.extend_from_slice(bytemuck::bytes_of(&RemoteRegion { addr, len, rkey, _pad: 0 }));
            }
        }
        let all = boot.all_gather(&blob)?;
        let want = blob_len(w, lanes, nr, regions.len());
        let qp_bytes = 32 * w * lanes;
        let mut remote = Vec::new();
        for (r, b) in all.iter().enumerate() {
            if b.len() != want {
                return Err(err(format!("rank {r} sent a {}-byte verbs blob; this rank expects {want}", b.len())));
            }
            let rr: Vec<RemoteRegion> = b[qp_bytes..].chunks_exact(24).map(bytemuck::pod_read_unaligned).collect();
            let region = |x: &[RemoteRegion]| Region {
                addr: x[0].addr,
                len: x[0].len,
                keys: x.iter().map(|x| x.rkey).collect(),
            };
            if let Some(st) = staging.as_mut() {
                st.remote.push(region(&rr[..nr]));
            }
            remote.push(rr[nr..].chunks_exact(nr).map(region).collect());
            if world.is_local(r as u32) {
                continue;
            }
            for lane in 0..lanes {
                let at = 32 * (world.rank as usize * lanes + lane);
                let theirs: QpInfo = bytemuck::pod_read_unaligned(&b[at..at + 32]);
                let i = r * lanes + lane;
                let d = &devs[lane % nr];
                let qp = qps[i].take().expect("made above");
                wires[i] = Some(if srd {
                    let ah = create_ah(d, theirs.gid)?;
                    Wire::Srd { qp, ah, remote_qpn: theirs.qpn }
                } else {
                    for step in [QpStep::Init, QpStep::Rtr, QpStep::Rts] {
                        let (mut a, m) = qp_attr(step, &infos[i], &theirs);
                        // SAFETY: live QP, attributes built for this transition.
                        if unsafe { ibv_modify_qp(qp.as_ptr(), &mut a, m.0 as i32) } != 0 {
                            return Err(os_err(&format!(
                                "ibv_modify_qp({step:?}) for rank {r} lane {lane} on {}",
                                d.name
                            )));
                        }
                    }
                    Wire::Rc(qp)
                });
            }
        }
        let remote_ranks = (0..world.world_size).map(|r| !world.is_local(r)).collect();
        let mut engine = Engine::new(cfg, world.rank, remote_ranks, local, remote, staging)?;
        let mut nic = IbvNic { qps: wires, by_qpn, cqs: devs.iter().map(|d| d.cq.clone()).collect() };
        let mut mem = CudaMem { device: world.device, stream: None, events: VecDeque::new(), issued: 0, done: 0 };
        engine.start(&mut nic, &mut mem)?;
        boot.barrier()?;
        Ok(VerbsTransport {
            engine,
            nic,
            mem,
            _mrs: mrs,
            _staging_mrs: staging_mrs,
            _staging: staging_buf,
            rails,
            srd,
            unreleased: 0,
        })
    }

    /// Whether this transport runs host-staged.
    pub fn staged(&self) -> bool {
        self.engine.staged()
    }

    /// The NICs this rank uses, with why each was chosen.
    pub fn rails(&self) -> &[Rail] {
        &self.rails
    }

    /// Whether the QPs are EFA SRD (else RC).
    pub fn srd(&self) -> bool {
        self.srd
    }
}

impl Transport for VerbsTransport {
    fn name(&self) -> &'static str {
        if self.srd {
            "verbs (EFA SRD)"
        } else {
            "verbs (RC)"
        }
    }

    fn on_proxy_thread(&mut self) -> CommResult<()> {
        self.mem = CudaMem::new(self.mem.device)?;
        Ok(())
    }

    fn post(&mut self, cmds: &[FifoCmd]) -> CommResult<()> {
        self.unreleased += cmds.len() as u64;
        self.engine.post(cmds, &mut self.nic, &mut self.mem)
    }

    fn unreleased(&mut self) -> CommResult<u64> {
        // All or none: the engine says only whether anything may still read a source.
        if !self.engine.sources_pending() {
            self.unreleased = 0;
        }
        Ok(self.unreleased)
    }

    fn progress(&mut self) -> CommResult<()> {
        // Only while the FIFO is idle: a completion asked for here does not undo selective
        // signalling under load.
        self.engine.progress_idle(&mut self.nic, &mut self.mem)
    }

    fn flush(&mut self) -> CommResult<()> {
        self.engine.flush(&mut self.nic, &mut self.mem)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_bring_up_blob_has_one_entry_per_rail() {
        // 4 ranks, 2 lanes, 2 rails, 3 regions: 8 QP infos, then (1 + 3) regions x 2 rails.
        assert_eq!(blob_len(4, 2, 2, 3), 32 * 8 + 24 * 2 * 4);
    }

    #[test]
    fn rails_follow_the_override_else_the_topology() {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/sysfs-2socket");
        let present: Vec<String> = ["rdmap0", "rdmap1", "rdmap2", "rdmap3"].map(String::from).to_vec();
        let opts = VerbsOptions { sysfs: fixture, ..VerbsOptions::default() };
        let names = |r: Vec<Rail>| r.into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(plan_rails(&opts, Some("0000:03:00.0"), &present).unwrap()), ["rdmap0", "rdmap1"]);
        // Only devices verbs lists count: rdmap0/1 absent -> the GPU's NUMA node (rdmap3).
        assert_eq!(names(plan_rails(&opts, Some("0000:03:00.0"), &present[2..]).unwrap()), ["rdmap3"]);
        let named = VerbsOptions { device: Some("rdmap2".into()), ..opts.clone() };
        assert_eq!(names(plan_rails(&named, Some("0000:03:00.0"), &present).unwrap()), ["rdmap2"]);
        // Verbs lists a device sysfs does not: the first one.
        assert_eq!(names(plan_rails(&opts, None, &["mlx5_0".to_string()]).unwrap()), ["mlx5_0"]);
        let e = plan_rails(&opts, None, &[]).unwrap_err().to_string();
        assert!(e.contains("no RDMA device found"), "{e}");
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
        let from = |pairs: &[(&str, &str)]| {
            let map: std::collections::HashMap<String, String> =
                pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            VerbsOptions::from_vars(|k| map.get(k).cloned())
        };
        for (var, bad) in
            [("MKERNEL_VERBS_LANES", "many"), ("MKERNEL_VERBS_RAILS", "0"), ("MKERNEL_IB_GID_INDEX", "300")]
        {
            let e = from(&[(var, bad)]).unwrap_err().to_string();
            assert!(e.contains(var) && e.contains(bad), "{e}");
        }
        let o = from(&[
            ("MKERNEL_IB_GID_INDEX", "3"),
            ("MKERNEL_IB_DEVICE", "mlx5_0,mlx5_1"),
            ("MKERNEL_VERBS_STAGED", "1"),
        ])
        .unwrap();
        assert_eq!((o.gid_index, o.device.as_deref(), o.force_staged), (3, Some("mlx5_0,mlx5_1"), true));
        assert_eq!(from(&[]).unwrap().gid_index, 0);
    }
}
