//! AWS EFA through rdma-core's `efadv`: hand-written bindings for the calls the SRD path needs
//! (`efadv_query_device`, `efadv_create_qp_ex`), loaded from `libefa.so.1` at run time so that
//! binaries still start on machines without it. The struct layouts are checked against the
//! installed `<infiniband/efadv.h>` by a test that compiles a C probe (`cargo test`).
//!
//! SRD QPs are not connected: one QP reaches any peer QP through an address handle (the peer's
//! GID) plus its QP number and a shared Q_Key. They move through RESET -> INIT -> RTR -> RTS
//! alone; writes use the extended work-request API (`ibv_wr_*`).
use super::engine::err;
use super::objects::{Context, Pd, Qp};
use crate::comm::error::CommResult;
use rdma_sys::*;
use std::ffi::c_int;
use std::sync::{Arc, OnceLock};

/// `EFADV_QP_DRIVER_TYPE_SRD`.
pub const QP_DRIVER_TYPE_SRD: u32 = 0;
/// `EFADV_DEVICE_ATTR_CAPS_RDMA_READ`.
pub const CAPS_RDMA_READ: u32 = 1 << 0;
/// `EFADV_DEVICE_ATTR_CAPS_RNR_RETRY`: the device retries a write that finds no receive posted.
pub const CAPS_RNR_RETRY: u32 = 1 << 1;
/// `EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID`.
pub const CAPS_CQ_WITH_SGID: u32 = 1 << 2;
/// `EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE` (rdma-core 45+; older headers, like Debian 12's v44, do
/// not name it, but the kernel reports it in the same word).
pub const CAPS_RDMA_WRITE: u32 = 1 << 3;
/// The Q_Key every SRD QP of mkernel uses (peers must present the same one).
pub const QKEY: u32 = 0x4d4b_0001;

/// `struct efadv_qp_init_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EfadvQpInitAttr {
    /// Extension mask (0).
    pub comp_mask: u64,
    /// [`QP_DRIVER_TYPE_SRD`].
    pub driver_qp_type: u32,
    /// Reserved, zero.
    pub reserved: [u8; 4],
}

/// `struct efadv_device_attr`.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct EfadvDeviceAttr {
    /// Extension mask.
    pub comp_mask: u64,
    /// Most send work requests per QP.
    pub max_sq_wr: u32,
    /// Most receive work requests per QP.
    pub max_rq_wr: u32,
    /// Most scatter/gather entries per send.
    pub max_sq_sge: u16,
    /// Most scatter/gather entries per receive.
    pub max_rq_sge: u16,
    /// Bytes of inline data a send may carry.
    pub inline_buf_size: u16,
    /// Reserved.
    pub reserved: [u8; 2],
    /// `CAPS_*` bits.
    pub device_caps: u32,
    /// Largest RDMA read/write.
    pub max_rdma_size: u32,
}

type QueryDevice = unsafe extern "C" fn(*mut ibv_context, *mut EfadvDeviceAttr, u32) -> c_int;
type CreateQpEx =
    unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex, *mut EfadvQpInitAttr, u32) -> *mut ibv_qp;

struct Efadv {
    query_device: QueryDevice,
    create_qp_ex: CreateQpEx,
    _lib: libloading::Library,
}

fn efadv() -> CommResult<&'static Efadv> {
    static LIB: OnceLock<Result<Efadv, String>> = OnceLock::new();
    let lib = LIB.get_or_init(|| {
        // SAFETY: libefa's initialisers only register its provider; the symbols are looked up with
        // the signatures of efadv.h (checked by the header test).
        unsafe {
            let lib = libloading::Library::new("libefa.so.1").map_err(|e| format!("loading libefa.so.1: {e}"))?;
            let query_device = *lib
                .get::<QueryDevice>(b"efadv_query_device\0")
                .map_err(|e| format!("libefa.so.1 lacks efadv_query_device: {e}"))?;
            let create_qp_ex = *lib
                .get::<CreateQpEx>(b"efadv_create_qp_ex\0")
                .map_err(|e| format!("libefa.so.1 lacks efadv_create_qp_ex: {e}"))?;
            Ok(Efadv { query_device, create_qp_ex, _lib: lib })
        }
    });
    lib.as_ref().map_err(|e| err(e.clone()))
}

/// What an EFA device can do, from `efadv_query_device`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EfaCaps {
    /// RDMA WRITE (and WRITE WITH IMMEDIATE) supported.
    pub rdma_write: bool,
    /// The device retries a write that finds no receive posted.
    pub rnr_retry: bool,
    /// Largest RDMA write.
    pub max_rdma_size: u32,
    /// Inline bytes per send.
    pub inline_buf_size: u16,
    /// Most send / receive requests per QP.
    pub max_sq_wr: u32,
    /// Most receive requests per QP.
    pub max_rq_wr: u32,
}

impl EfaCaps {
    fn from_attr(a: &EfadvDeviceAttr) -> Self {
        Self {
            rdma_write: a.device_caps & CAPS_RDMA_WRITE != 0,
            rnr_retry: a.device_caps & CAPS_RNR_RETRY != 0,
            max_rdma_size: a.max_rdma_size,
            inline_buf_size: a.inline_buf_size,
            max_sq_wr: a.max_sq_wr,
            max_rq_wr: a.max_rq_wr,
        }
    }

    /// Why mkernel's SRD path cannot run on this device, if it cannot.
    pub fn unusable(&self, name: &str, sq_depth: u32, recv_depth: u32, max_msg: u64) -> Option<String> {
        let why = if !self.rdma_write {
            "no RDMA WRITE (device_caps lacks EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE; p5-class EFA and a recent kernel driver have it)".to_string()
        } else if !self.rnr_retry {
            "no RNR retry (immediates could find no receive posted)".to_string()
        } else if sq_depth > self.max_sq_wr || recv_depth > self.max_rq_wr {
            format!("queue depths {sq_depth}/{recv_depth} exceed the device's {}/{}", self.max_sq_wr, self.max_rq_wr)
        } else if max_msg > self.max_rdma_size as u64 {
            format!("max_msg {max_msg} exceeds the device's largest RDMA write {}", self.max_rdma_size)
        } else if self.inline_buf_size < 4 {
            format!("inline buffer of {} bytes (credit words need 4)", self.inline_buf_size)
        } else {
            return None;
        };
        Some(format!("EFA device {name}: {why}"))
    }
}

/// The EFA capabilities of an open device; `Ok(None)`: not an EFA device (or no libefa).
pub fn query(ctx: &Context) -> CommResult<Option<EfaCaps>> {
    let Ok(lib) = efadv() else { return Ok(None) };
    let mut a = EfadvDeviceAttr::default();
    // SAFETY: ctx is open; `a` is writable for the size we pass.
    let rc = unsafe { (lib.query_device)(ctx.as_ptr(), &mut a, std::mem::size_of::<EfadvDeviceAttr>() as u32) };
    // Non-EFA devices answer EOPNOTSUPP (or another errno): not EFA.
    Ok((rc == 0).then(|| EfaCaps::from_attr(&a)))
}

/// An SRD QP on `pd`'s device with completions on `cq`, brought to RTS on `port`.
pub fn create_srd_qp(
    ctx: &Context,
    pd: &Arc<Pd>,
    cq: &Arc<super::objects::Cq>,
    port: u8,
    sq_depth: u32,
    recv_depth: u32,
    rnr_retry: bool,
) -> CommResult<Qp> {
    let lib = efadv()?;
    // SAFETY: plain data; zero is a valid start, filled below.
    let mut init: ibv_qp_init_attr_ex = unsafe { std::mem::zeroed() };
    init.send_cq = cq.as_ptr();
    init.recv_cq = cq.as_ptr();
    init.qp_type = ibv_qp_type::IBV_QPT_DRIVER;
    init.cap.max_send_wr = sq_depth;
    init.cap.max_recv_wr = recv_depth.max(1);
    init.cap.max_send_sge = 1;
    init.cap.max_recv_sge = 1;
    init.cap.max_inline_data = 4;
    init.pd = pd.as_ptr();
    init.comp_mask =
        (ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_PD | ibv_qp_init_attr_mask::IBV_QP_INIT_ATTR_SEND_OPS_FLAGS).0;
    init.send_ops_flags = (ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_RDMA_WRITE
        | ibv_qp_create_send_ops_flags::IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM)
        .0 as u64;
    let mut efa = EfadvQpInitAttr { driver_qp_type: QP_DRIVER_TYPE_SRD, ..Default::default() };
    // SAFETY: ctx is open; both attribute structs are initialised and outlive the call.
    let raw =
        unsafe { (lib.create_qp_ex)(ctx.as_ptr(), &mut init, &mut efa, std::mem::size_of::<EfadvQpInitAttr>() as u32) };
    // SAFETY: a QP made here, destroyed once by its owner; its PD and CQ are held by it.
    let qp = unsafe { Qp::new(raw, "efadv_create_qp_ex(SRD)", |p| ibv_destroy_qp(p), (pd.clone(), cq.clone()))? };
    for (state, mask) in srd_transitions(port, rnr_retry) {
        let mut a = state;
        // SAFETY: live QP, attributes built for this transition.
        if unsafe { ibv_modify_qp(qp.as_ptr(), &mut a, mask.0 as i32) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(err(format!("ibv_modify_qp(SRD -> {:?}): {e}", a.qp_state)));
        }
    }
    Ok(qp)
}

/// The SRD QP's three transitions: INIT (port, Q_Key), RTR, RTS (send PSN, RNR retry).
pub fn srd_transitions(port: u8, rnr_retry: bool) -> [(ibv_qp_attr, ibv_qp_attr_mask); 3] {
    use ibv_qp_attr_mask as M;
    // SAFETY: plain data; zero is valid.
    let zero: ibv_qp_attr = unsafe { std::mem::zeroed() };
    let init = ibv_qp_attr { qp_state: ibv_qp_state::IBV_QPS_INIT, pkey_index: 0, port_num: port, qkey: QKEY, ..zero };
    let rtr = ibv_qp_attr { qp_state: ibv_qp_state::IBV_QPS_RTR, ..zero };
    let rts = ibv_qp_attr {
        qp_state: ibv_qp_state::IBV_QPS_RTS,
        sq_psn: 0,
        rnr_retry: if rnr_retry { 7 } else { 0 },
        ..zero
    };
    let rts_mask = if rnr_retry {
        M::IBV_QP_STATE | M::IBV_QP_SQ_PSN | M::IBV_QP_RNR_RETRY
    } else {
        M::IBV_QP_STATE | M::IBV_QP_SQ_PSN
    };
    [
        (init, M::IBV_QP_STATE | M::IBV_QP_PKEY_INDEX | M::IBV_QP_PORT | M::IBV_QP_QKEY),
        (rtr, M::IBV_QP_STATE),
        (rts, rts_mask),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    #[test]
    fn srd_transitions_set_qkey_and_rnr_retry() {
        let [(i, im), (r, rm), (s, sm)] = srd_transitions(1, true);
        assert_eq!((i.qp_state, i.port_num, i.qkey), (ibv_qp_state::IBV_QPS_INIT, 1, QKEY));
        assert!(im.0 & ibv_qp_attr_mask::IBV_QP_QKEY.0 != 0);
        assert_eq!((r.qp_state, rm.0), (ibv_qp_state::IBV_QPS_RTR, ibv_qp_attr_mask::IBV_QP_STATE.0));
        assert_eq!((s.qp_state, s.rnr_retry), (ibv_qp_state::IBV_QPS_RTS, 7));
        assert!(sm.0 & ibv_qp_attr_mask::IBV_QP_RNR_RETRY.0 != 0);
        assert!(srd_transitions(1, false)[2].1 .0 & ibv_qp_attr_mask::IBV_QP_RNR_RETRY.0 == 0);
    }

    #[test]
    fn caps_say_why_a_device_is_unusable() {
        let good = EfaCaps {
            rdma_write: true,
            rnr_retry: true,
            max_rdma_size: 1 << 30,
            inline_buf_size: 32,
            max_sq_wr: 4096,
            max_rq_wr: 8192,
        };
        assert_eq!(good.unusable("rdmap0", 1024, 1088, 1 << 20), None);
        let no_write = EfaCaps { rdma_write: false, ..good }.unusable("rdmap0", 1024, 1088, 1 << 20).unwrap();
        assert!(no_write.contains("EFA device rdmap0: no RDMA WRITE"), "{no_write}");
        assert!(good.unusable("x", 8192, 1, 64).unwrap().contains("queue depths"));
        assert!(good.unusable("x", 16, 16, 1 << 31).unwrap().contains("max_msg"));
        let attr = EfadvDeviceAttr { device_caps: CAPS_RDMA_WRITE | CAPS_RNR_RETRY, ..Default::default() };
        let c = EfaCaps::from_attr(&attr);
        assert!(c.rdma_write && c.rnr_retry);
    }

    /// The hand-written layouts and constants against the installed efadv.h: a C probe prints
    /// sizeof/offsetof/values, compared with Rust's. The header comes with libibverbs-dev, which
    /// scripts/setup.sh installs, so a missing header or compiler fails here.
    #[test]
    fn bindings_match_the_installed_efadv_header() {
        use std::mem::{offset_of, size_of};
        let dir = std::env::temp_dir().join(format!("mkernel-efadv-probe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let src = dir.join("probe.c");
        std::fs::write(
            &src,
            r#"#include <stdio.h>
#include <stddef.h>
#include <infiniband/efadv.h>
#define P(x) printf("%s=%lu\n", #x, (unsigned long)(x))
int main(void) {
  P(sizeof(struct efadv_qp_init_attr)); P(offsetof(struct efadv_qp_init_attr, driver_qp_type));
  P(sizeof(struct efadv_device_attr)); P(offsetof(struct efadv_device_attr, max_sq_wr));
  P(offsetof(struct efadv_device_attr, max_rq_wr)); P(offsetof(struct efadv_device_attr, max_sq_sge));
  P(offsetof(struct efadv_device_attr, max_rq_sge)); P(offsetof(struct efadv_device_attr, inline_buf_size));
  P(offsetof(struct efadv_device_attr, device_caps)); P(offsetof(struct efadv_device_attr, max_rdma_size));
  P(EFADV_QP_DRIVER_TYPE_SRD); P(EFADV_DEVICE_ATTR_CAPS_RDMA_READ); P(EFADV_DEVICE_ATTR_CAPS_RNR_RETRY);
  P(EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID);
#ifdef EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE
  P(EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE);
#endif
  P(sizeof(struct ibv_qp_init_attr_ex));
  return 0;
}
"#,
        )
        .unwrap();
        let exe = dir.join("probe");
        let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
        let out =
            Command::new(&cc).arg(&src).arg("-o").arg(&exe).output().unwrap_or_else(|e| panic!("running {cc}: {e}"));
        assert!(out.status.success(), "compiling the efadv probe: {}", String::from_utf8_lossy(&out.stderr));
        let out = Command::new(&exe).output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        let want = [
            ("sizeof(struct efadv_qp_init_attr)", size_of::<EfadvQpInitAttr>()),
            ("offsetof(struct efadv_qp_init_attr, driver_qp_type)", offset_of!(EfadvQpInitAttr, driver_qp_type)),
            ("sizeof(struct efadv_device_attr)", size_of::<EfadvDeviceAttr>()),
            ("offsetof(struct efadv_device_attr, max_sq_wr)", offset_of!(EfadvDeviceAttr, max_sq_wr)),
            ("offsetof(struct efadv_device_attr, max_rq_wr)", offset_of!(EfadvDeviceAttr, max_rq_wr)),
            ("offsetof(struct efadv_device_attr, max_sq_sge)", offset_of!(EfadvDeviceAttr, max_sq_sge)),
            ("offsetof(struct efadv_device_attr, max_rq_sge)", offset_of!(EfadvDeviceAttr, max_rq_sge)),
            ("offsetof(struct efadv_device_attr, inline_buf_size)", offset_of!(EfadvDeviceAttr, inline_buf_size)),
            ("offsetof(struct efadv_device_attr, device_caps)", offset_of!(EfadvDeviceAttr, device_caps)),
            ("offsetof(struct efadv_device_attr, max_rdma_size)", offset_of!(EfadvDeviceAttr, max_rdma_size)),
            ("EFADV_QP_DRIVER_TYPE_SRD", QP_DRIVER_TYPE_SRD as usize),
            ("EFADV_DEVICE_ATTR_CAPS_RDMA_READ", CAPS_RDMA_READ as usize),
            ("EFADV_DEVICE_ATTR_CAPS_RNR_RETRY", CAPS_RNR_RETRY as usize),
            ("EFADV_DEVICE_ATTR_CAPS_CQ_WITH_SGID", CAPS_CQ_WITH_SGID as usize),
            ("EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE", CAPS_RDMA_WRITE as usize),
            ("sizeof(struct ibv_qp_init_attr_ex)", size_of::<ibv_qp_init_attr_ex>()),
        ];
        for (name, rust) in want {
            let c = text.lines().find_map(|l| l.strip_prefix(name).and_then(|v| v.strip_prefix('=')));
            match c {
                Some(v) => assert_eq!(v.parse::<usize>().unwrap(), rust, "{name}: header vs Rust"),
                // Only the RDMA WRITE bit may be missing (headers before rdma-core 45).
                None => assert_eq!(name, "EFADV_DEVICE_ATTR_CAPS_RDMA_WRITE", "the probe printed no {name}"),
            }
        }
    }
}
