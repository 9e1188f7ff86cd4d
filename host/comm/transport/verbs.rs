//! RDMA verbs transport (InfiniBand / RoCE, reliable-connected QPs) through `rdma-sys`.
//!
//! Bring-up: open the device, a protection domain and one completion queue; one RC queue pair
//! per remote rank; exchange [`QpInfo`] (LID, GID, QP number, PSN) and the registered regions
//! ([`RemoteRegion`]: address, length, rkey) through the bootstrap; move each QP INIT -> RTR ->
//! RTS. GPU memory is registered through dma-buf (`cuMemGetHandleForAddressRange` +
//! `ibv_reg_dmabuf_mr`). A FIFO WRITE becomes an RDMA WRITE of the data followed, on the same QP,
//! by a small inline RDMA WRITE of the flag: RC delivers them in order, so the flag means the data
//! is there. Every `signal_every`-th work request is signalled; the CQ is polled to retire them.
//!
//! What has run: device discovery and its error where no RDMA device exists (our GPU machines
//! have none; soft-RoCE is refused there), and the pure planning logic below (unit tests). What
//! has NOT run on a NIC: everything that touches a QP, an MR or the CQ. Not written: the
//! host-staged fallback for NICs without dma-buf (registration fails with an error that says so)
//! and write-with-immediate for transports that reorder (EFA SRD).
use crate::abi::{FifoCmd, OP_FENCE, OP_SIGNAL, OP_WRITE};
use crate::comm::bootstrap::Bootstrap;
use crate::comm::error::{CommError, CommResult};
use crate::comm::transport::Transport;
use crate::comm::world::World;
use bytemuck::{Pod, Zeroable};
use rdma_sys::*;
use std::ffi::CStr;
use std::ptr;

fn err(what: impl Into<String>) -> CommError {
    CommError::Transport { transport: "verbs", what: what.into() }
}

fn os_err(call: &str) -> CommError {
    err(format!("{call} failed: {}", std::io::Error::last_os_error()))
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
    pub lid: u16,
    pub port: u8,
    pub gid_index: u8,
    pub qpn: u32,
    pub psn: u32,
    pub _pad: u32,
    pub gid: [u8; 16],
}
const _: () = assert!(std::mem::size_of::<QpInfo>() == 32);

/// A registered buffer a peer may write.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
pub struct RemoteRegion {
    pub addr: u64,
    pub len: u64,
    pub rkey: u32,
    pub _pad: u32,
}
const _: () = assert!(std::mem::size_of::<RemoteRegion>() == 24);

/// The attribute mask and fields for one RC state transition (pure, so it is testable).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum QpStep {
    Init,
    Rtr,
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

/// One planned RDMA WRITE.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PlannedWrite {
    pub qp: u32,
    pub local_addr: u64,
    pub lkey: u32,
    pub len: u32,
    pub remote_addr: u64,
    pub rkey: u32,
    /// Inline flag write: the value travels in the work request itself.
    pub inline_value: Option<u32>,
}

/// Local registered region: (address, length, lkey).
pub type LocalRegion = (u64, u64, u32);

/// Turn a FIFO command into RDMA writes: data (in pieces of at most `max_msg` bytes), then the
/// flag on the same QP. Pure; checks every offset against the registered regions.
pub fn plan(
    cmd: &FifoCmd,
    local: &[LocalRegion],
    remote: &[Vec<RemoteRegion>],
    max_msg: u64,
) -> CommResult<Vec<PlannedWrite>> {
    let dst = cmd.dst_rank();
    let regions = remote.get(dst as usize).ok_or_else(|| err(format!("no regions known for rank {dst}")))?;
    let resolve_remote = |loc: u64, len: u64| -> CommResult<(u64, u32)> {
        let (id, off) = FifoCmd::split(loc);
        let r = regions.get(id as usize).ok_or_else(|| err(format!("rank {dst} registered no buffer {id}")))?;
        if r.rkey == 0 || off + len > r.len {
            return Err(err(format!("rank {dst} buffer {id}: bytes {off}..{} outside its {}", off + len, r.len)));
        }
        Ok((r.addr + off, r.rkey))
    };
    let mut out = Vec::new();
    match cmd.op() {
        OP_WRITE => {
            let (id, off) = FifoCmd::split(cmd.src);
            let &(base, len, lkey) =
                local.get(id as usize).ok_or_else(|| err(format!("local buffer {id} not registered")))?;
            if off + cmd.bytes > len {
                return Err(err(format!("local buffer {id}: bytes {off}..{} outside its {len}", off + cmd.bytes)));
            }
            let (raddr, rkey) = resolve_remote(cmd.dst, cmd.bytes)?;
            let mut done = 0;
            while done < cmd.bytes {
                let n = (cmd.bytes - done).min(max_msg);
                out.push(PlannedWrite {
                    qp: dst,
                    local_addr: base + off + done,
                    lkey,
                    len: n as u32,
                    remote_addr: raddr + done,
                    rkey,
                    inline_value: None,
                });
                done += n;
            }
        }
        OP_SIGNAL | OP_FENCE => {}
        op => return Err(err(format!("unknown opcode {op}"))),
    }
    if cmd.flag != 0 && cmd.op() != OP_FENCE {
        let (raddr, rkey) = resolve_remote(cmd.flag, 4)?;
        out.push(PlannedWrite {
            qp: dst,
            local_addr: 0,
            lkey: 0,
            len: 4,
            remote_addr: raddr,
            rkey,
            inline_value: Some(cmd.flag_value as u32),
        });
    }
    Ok(out)
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

/// The verbs transport (see the module docs).
pub struct VerbsTransport {
    qps: Vec<*mut ibv_qp>,
    mrs: Vec<*mut ibv_mr>,
    local: Vec<LocalRegion>,
    remote: Vec<Vec<RemoteRegion>>,
    max_msg: u64,
    signal_every: u32,
    unsignalled: u32,
    outstanding: u32,
    dev: Device,
}

// SAFETY: verbs objects are used only from the proxy thread after construction.
unsafe impl Send for VerbsTransport {}

const PORT: u8 = 1;
const CQ_DEPTH: i32 = 4096;
const SQ_DEPTH: u32 = 1024;

impl VerbsTransport {
    /// Collective: open the NIC, register `regions` (GPU buffers, by FIFO buffer id), connect an
    /// RC QP to every rank on another node, exchange regions. Errors name the failing verb.
    pub fn connect(
        world: &World,
        boot: &mut Bootstrap,
        regions: &[(u64, u64)],
        device: Option<&str>,
    ) -> CommResult<VerbsTransport> {
        let names = rdma_devices();
        if names.is_empty() {
            return Err(err("no RDMA device found (ibv_get_device_list listed none): use the emulated NIC, or run on a node with a ConnectX/EFA NIC"));
        }
        let want = device.map(str::to_string).unwrap_or_else(|| names[0].clone());
        let dev = Self::open(&want)?;
        let mut t = VerbsTransport {
            qps: Vec::new(),
            mrs: Vec::new(),
            local: Vec::new(),
            remote: Vec::new(),
            max_msg: 1 << 30,
            signal_every: 64,
            unsignalled: 0,
            outstanding: 0,
            dev,
        };
        for &(addr, len) in regions {
            let mr = register_gpu(t.dev.pd, addr, len)?;
            t.mrs.push(mr);
            // SAFETY: mr is a live registration.
            t.local.push((addr, len, unsafe { (*mr).lkey }));
        }
        let mut port: ibv_port_attr = unsafe { std::mem::zeroed() };
        // SAFETY: ctx is open; port_attr is writable.
        if unsafe { ___ibv_query_port(t.dev.ctx, PORT, &mut port) } != 0 {
            return Err(os_err("ibv_query_port"));
        }
        let mut gid: ibv_gid = unsafe { std::mem::zeroed() };
        // SAFETY: as above; GID index 0 exists on every active port.
        if unsafe { ibv_query_gid(t.dev.ctx, PORT, 0, &mut gid) } != 0 {
            return Err(os_err("ibv_query_gid"));
        }
        let mut infos = vec![QpInfo::default(); world.world_size as usize];
        for r in 0..world.world_size {
            if world.is_local(r) {
                t.qps.push(ptr::null_mut());
                continue;
            }
            let qp = create_qp(&t.dev)?;
            t.qps.push(qp);
            // SAFETY: qp is live; gid is plain bytes.
            infos[r as usize] = QpInfo {
                lid: port.lid,
                port: PORT,
                gid_index: 0,
                qpn: unsafe { (*qp).qp_num },
                psn: 0x1000 + r,
                _pad: 0,
                gid: unsafe { gid.raw },
            };
        }
        // Everyone learns every QP aimed at it, and every rank's regions.
        let mut blob: Vec<u8> = bytemuck::cast_slice(&infos).to_vec();
        for (i, &(addr, len)) in regions.iter().enumerate() {
            let rr = RemoteRegion { addr, len, rkey: unsafe { (*t.mrs[i]).rkey }, _pad: 0 };
            blob.extend_from_slice(bytemuck::bytes_of(&rr));
        }
        let all = boot.all_gather(&blob)?;
        let qp_bytes = 32 * world.world_size as usize;
        for (r, b) in all.iter().enumerate() {
            let regs: Vec<RemoteRegion> = b[qp_bytes..].chunks_exact(24).map(bytemuck::pod_read_unaligned).collect();
            t.remote.push(regs);
            if world.is_local(r as u32) {
                continue;
            }
            let theirs: QpInfo =
                bytemuck::pod_read_unaligned(&b[32 * world.rank as usize..32 * (world.rank as usize + 1)]);
            let mine = infos[r];
            for step in [QpStep::Init, QpStep::Rtr, QpStep::Rts] {
                let (mut a, m) = qp_attr(step, &mine, &theirs);
                // SAFETY: live QP, attributes built for this transition.
                if unsafe { ibv_modify_qp(t.qps[r], &mut a, m.0 as i32) } != 0 {
                    return Err(os_err(&format!("ibv_modify_qp({step:?}) for rank {r}")));
                }
            }
        }
        boot.barrier()?;
        Ok(t)
    }

    fn open(name: &str) -> CommResult<Device> {
        let mut n = 0;
        // SAFETY: device list handling as in rdma_devices; objects checked for NULL.
        unsafe {
            let list = ibv_get_device_list(&mut n);
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
            dev.cq = ibv_create_cq(ctx, CQ_DEPTH, ptr::null_mut(), ptr::null_mut(), 0);
            if dev.cq.is_null() {
                return Err(os_err("ibv_create_cq"));
            }
            Ok(dev)
        }
    }

    fn post_one(&mut self, w: &PlannedWrite) -> CommResult<()> {
        let mut value = w.inline_value.unwrap_or(0);
        let mut sge = ibv_sge {
            addr: if w.inline_value.is_some() { &mut value as *mut u32 as u64 } else { w.local_addr },
            length: w.len,
            lkey: w.lkey,
        };
        self.unsignalled += 1;
        let signalled = self.unsignalled >= self.signal_every;
        // SAFETY: a zeroed work request is valid; every pointer lives across the call (inline
        // data is copied by ibv_post_send before it returns).
        unsafe {
            let mut wr: ibv_send_wr = std::mem::zeroed();
            wr.sg_list = &mut sge;
            wr.num_sge = 1;
            wr.opcode = ibv_wr_opcode::IBV_WR_RDMA_WRITE;
            let mut flags = 0;
            if w.inline_value.is_some() {
                flags |= ibv_send_flags::IBV_SEND_INLINE.0;
            }
            if signalled {
                flags |= ibv_send_flags::IBV_SEND_SIGNALED.0;
            }
            wr.send_flags = flags;
            wr.wr.rdma.remote_addr = w.remote_addr;
            wr.wr.rdma.rkey = w.rkey;
            let mut bad = ptr::null_mut();
            let rc = ibv_post_send(self.qps[w.qp as usize], &mut wr, &mut bad);
            if rc != 0 {
                return Err(err(format!(
                    "ibv_post_send to rank {} failed: {}",
                    w.qp,
                    std::io::Error::from_raw_os_error(rc)
                )));
            }
        }
        if signalled {
            self.unsignalled = 0;
            self.outstanding += 1;
        }
        Ok(())
    }

    fn poll(&mut self, until_empty: bool) -> CommResult<()> {
        let mut wc: [ibv_wc; 16] = unsafe { std::mem::zeroed() };
        loop {
            // SAFETY: the CQ is live and wc has room for 16 entries.
            let n = unsafe { ibv_poll_cq(self.dev.cq, 16, wc.as_mut_ptr()) };
            if n < 0 {
                return Err(err("ibv_poll_cq failed"));
            }
            for c in &wc[..n as usize] {
                if c.status != ibv_wc_status::IBV_WC_SUCCESS {
                    return Err(err(format!("work completion with status {} (QP {})", c.status, c.qp_num)));
                }
                self.outstanding = self.outstanding.saturating_sub(1);
            }
            if !until_empty || self.outstanding == 0 {
                return Ok(());
            }
        }
    }
}

fn register_gpu(pd: *mut ibv_pd, addr: u64, len: u64) -> CommResult<*mut ibv_mr> {
    let fd = crate::gpu::dmabuf_fd(addr, len)
        .map_err(|e| err(format!("exporting GPU memory as dma-buf: {e} (host-staged fallback not implemented)")))?;
    let access = (ibv_access_flags::IBV_ACCESS_LOCAL_WRITE | ibv_access_flags::IBV_ACCESS_REMOTE_WRITE).0 as i32;
    // SAFETY: fd is a dma-buf of exactly [addr, addr+len); iova = addr keeps GPU addresses valid
    // as RDMA addresses.
    let mr = unsafe { ibv_reg_dmabuf_mr(pd, 0, len as usize, addr, fd, access) };
    // SAFETY: closing our copy of the descriptor; the MR keeps its own reference.
    unsafe { libc::close(fd) };
    if mr.is_null() {
        return Err(os_err(
            "ibv_reg_dmabuf_mr (does the NIC driver support dma-buf? host-staged fallback not implemented)",
        ));
    }
    Ok(mr)
}

fn create_qp(dev: &Device) -> CommResult<*mut ibv_qp> {
    // SAFETY: zeroed init attributes are valid; filled below.
    let mut init: ibv_qp_init_attr = unsafe { std::mem::zeroed() };
    init.send_cq = dev.cq;
    init.recv_cq = dev.cq;
    init.qp_type = ibv_qp_type::IBV_QPT_RC;
    init.cap.max_send_wr = SQ_DEPTH;
    init.cap.max_recv_wr = 1;
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

impl Transport for VerbsTransport {
    fn name(&self) -> &'static str {
        "verbs"
    }

    fn post(&mut self, cmds: &[FifoCmd]) -> CommResult<()> {
        for c in cmds {
            if c.op() == OP_FENCE {
                self.flush()?;
                continue;
            }
            for w in plan(c, &self.local, &self.remote, self.max_msg)? {
                if self.qps.get(w.qp as usize).is_none_or(|q| q.is_null()) {
                    return Err(err(format!("rank {} is on this node (NVLink path) or unknown: no QP", w.qp)));
                }
                // Keep the send queue from overflowing: retire completions when it fills.
                while self.outstanding as u64 * self.signal_every as u64 >= SQ_DEPTH as u64 - self.signal_every as u64 {
                    self.poll(false)?;
                }
                self.post_one(&w)?;
            }
        }
        Ok(())
    }

    fn progress(&mut self) -> CommResult<()> {
        self.poll(false)
    }

    fn flush(&mut self) -> CommResult<()> {
        self.poll(true)
    }
}

impl Drop for VerbsTransport {
    fn drop(&mut self) {
        // SAFETY: children before parents: QPs and MRs, then (Device's drop) CQ, PD, context.
        unsafe {
            for &qp in self.qps.iter().filter(|q| !q.is_null()) {
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
    use crate::abi::{BUF_FLAGS, BUF_INPUT, BUF_OUTPUT};

    fn write(dst: u32, src_off: u64, dst_off: u64, bytes: u64, flag: bool) -> FifoCmd {
        FifoCmd {
            header: FifoCmd::header_word(OP_WRITE, 0, dst, 0),
            src: FifoCmd::loc(BUF_INPUT, src_off),
            dst: FifoCmd::loc(BUF_OUTPUT, dst_off),
            bytes,
            flag: if flag { FifoCmd::loc(BUF_FLAGS, 8) } else { 0 },
            flag_value: 42,
            ..Default::default()
        }
    }

    fn regions() -> (Vec<LocalRegion>, Vec<Vec<RemoteRegion>>) {
        let local = vec![(0x1000, 4096, 11), (0x10000, 8192, 12), (0x20000, 64, 13)];
        let r = |a, l, k| RemoteRegion { addr: a, len: l, rkey: k, _pad: 0 };
        let remote = vec![vec![], vec![r(0, 0, 0), r(0x90000, 8192, 21), r(0xa0000, 64, 22)]];
        (local, remote)
    }

    #[test]
    fn write_then_flag_on_the_same_qp() {
        let (l, r) = regions();
        let p = plan(&write(1, 16, 1024, 3000, true), &l, &r, 1024).unwrap();
        assert_eq!(p.len(), 4, "3000 bytes in 1024-byte messages, then the flag");
        assert_eq!(
            (p[0].local_addr, p[0].remote_addr, p[0].len, p[0].lkey, p[0].rkey),
            (0x1010, 0x90400, 1024, 11, 21)
        );
        assert_eq!((p[2].local_addr, p[2].len), (0x1010 + 2048, 952));
        assert_eq!(
            p[3],
            PlannedWrite {
                qp: 1,
                local_addr: 0,
                lkey: 0,
                len: 4,
                remote_addr: 0xa0008,
                rkey: 22,
                inline_value: Some(42)
            }
        );
        assert!(p.iter().all(|w| w.qp == 1));
    }

    #[test]
    fn bounds_are_checked() {
        let (l, r) = regions();
        assert!(plan(&write(1, 4000, 0, 200, false), &l, &r, 1 << 20)
            .unwrap_err()
            .to_string()
            .contains("local buffer 0"));
        assert!(plan(&write(1, 0, 8000, 400, false), &l, &r, 1 << 20)
            .unwrap_err()
            .to_string()
            .contains("rank 1 buffer 1"));
        assert!(plan(&write(0, 0, 0, 4, false), &l, &r, 1 << 20).is_err(), "rank 0 registered nothing");
        assert!(plan(&write(5, 0, 0, 4, false), &l, &r, 1 << 20).is_err());
    }

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
        let mut boot = Bootstrap::connect(&w, std::time::Duration::from_secs(1)).unwrap();
        let e = VerbsTransport::connect(&w, &mut boot, &[], None).err().expect("no device must be an error");
        assert!(e.to_string().contains("no RDMA device found"), "{e}");
    }
}
