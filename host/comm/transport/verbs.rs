//! RDMA verbs (InfiniBand / RoCE) through `rdma-sys`.
//!
//! What exists and has run: device discovery with a clear error where no RDMA device exists (our
//! GPU machines have none, and soft-RoCE is refused there). Not yet written: protection domain,
//! completion queue and RC queue-pair bring-up with QP info exchanged over the bootstrap, GPU
//! memory registration through dma-buf (cuMemGetHandleForAddressRange + ibv_reg_dmabuf_mr) with a
//! host-staged fallback, RDMA WRITE of data then flag on one QP with selective signalling, and CQ
//! polling. Until then the emulated NIC carries inter-node traffic.
use crate::comm::error::{CommError, CommResult};
use std::ffi::CStr;

/// Names of the RDMA devices on this machine (empty where there are none or no driver).
pub fn rdma_devices() -> Vec<String> {
    let mut n = 0i32;
    // SAFETY: ibv_get_device_list returns a NULL-terminated array (or NULL) that we free below.
    unsafe {
        let list = rdma_sys::ibv_get_device_list(&mut n);
        if list.is_null() {
            return Vec::new();
        }
        let names = (0..n.max(0) as usize)
            .filter_map(|i| {
                let d = *list.add(i);
                if d.is_null() {
                    return None;
                }
                let name = rdma_sys::ibv_get_device_name(d);
                (!name.is_null()).then(|| CStr::from_ptr(name).to_string_lossy().into_owned())
            })
            .collect();
        rdma_sys::ibv_free_device_list(list);
        names
    }
}

/// Open the verbs transport. Errors clearly where no RDMA device exists, and (for now) where one
/// does, since queue-pair bring-up is not written yet (see the module docs).
pub fn open_verbs() -> CommResult<()> {
    let devices = rdma_devices();
    if devices.is_empty() {
        return Err(CommError::Transport {
            transport: "verbs",
            what: "no RDMA device found (ibv_get_device_list listed none): use the emulated NIC, or run on a node with a ConnectX/EFA NIC".into(),
        });
    }
    Err(CommError::Transport {
        transport: "verbs",
        what: format!("RDMA devices {devices:?} found, but mkernel's RC queue-pair transport is not implemented yet: use the emulated NIC"),
    })
}
