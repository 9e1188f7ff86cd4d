//! What links the GPUs of this host: peer access and native atomics from the driver, NVLink from
//! NVML (loaded at run time; absent NVML leaves the NVLink columns unknown), and the RDMA devices
//! sysfs lists. Read by `mkernel info` and by the communicator's transport report.
use super::error::{check, Result};
use cust_raw as sys;
use std::ffi::{c_char, c_void, CStr, CString};

/// How two GPUs of this host reach each other.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Link {
    /// Peer access (loads and stores to the other GPU's memory) is possible.
    pub peer_access: bool,
    /// Native atomics over the link.
    pub native_atomics: bool,
    /// The driver's relative performance rank of the link (lower is better).
    pub perf_rank: i32,
    /// NVLink between them (None: NVML unavailable).
    pub nvlink: Option<bool>,
}

/// One GPU of the host.
#[derive(Clone, Debug)]
pub struct GpuNode {
    /// CUDA ordinal.
    pub ordinal: u32,
    /// PCI bus id (`0000:18:00.0`).
    pub pci_bus_id: String,
    /// Active NVLinks (None: NVML unavailable).
    pub nvlinks: Option<u32>,
}

/// GPUs and the links between every pair.
#[derive(Clone, Debug)]
pub struct Topology {
    /// The GPUs, by ordinal.
    pub gpus: Vec<GpuNode>,
    /// `links[i][j]`: from GPU i to GPU j (`None` on the diagonal).
    pub links: Vec<Vec<Option<Link>>>,
}

impl Topology {
    /// True when every pair has peer access (one node's NVLink path works).
    pub fn all_peer_access(&self) -> bool {
        self.links.iter().flatten().flatten().all(|l| l.peer_access)
    }
}

/// An RDMA device from `/sys/class/infiniband`.
#[derive(Clone, Debug)]
pub struct RdmaDevice {
    /// Name (`mlx5_0`, `rdmap0s6`, ...).
    pub name: String,
    /// NUMA node of its PCI device (-1: unknown).
    pub numa_node: i32,
    /// PCI address of the device.
    pub pci: String,
}

/// RDMA devices sysfs lists (empty where there are none or no sysfs).
pub fn rdma_devices() -> Vec<RdmaDevice> {
    let Ok(dir) = std::fs::read_dir("/sys/class/infiniband") else { return Vec::new() };
    let mut out: Vec<RdmaDevice> = dir
        .flatten()
        .map(|e| {
            let path = e.path().join("device");
            let read = |f: &str| std::fs::read_to_string(path.join(f)).map(|s| s.trim().to_string()).ok();
            RdmaDevice {
                name: e.file_name().to_string_lossy().into_owned(),
                numa_node: read("numa_node").and_then(|s| s.parse().ok()).unwrap_or(-1),
                pci: std::fs::canonicalize(&path)
                    .ok()
                    .and_then(|p| p.file_name().map(|f| f.to_string_lossy().into_owned()))
                    .unwrap_or_default(),
            }
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// The PCI bus id (`0000:18:00.0`) of GPU `ordinal` (driver initialised by the caller).
pub fn pci_bus_id(ordinal: u32) -> Result<String> {
    let mut bus = [0 as c_char; 32];
    // SAFETY: writes at most 32 bytes (NUL-terminated) for a valid ordinal.
    check("cuDeviceGetPCIBusId", unsafe { sys::cuDeviceGetPCIBusId(bus.as_mut_ptr(), 32, ordinal as i32) })?;
    // SAFETY: the driver wrote a NUL-terminated string into `bus`.
    Ok(unsafe { CStr::from_ptr(bus.as_ptr()) }.to_string_lossy().into_owned())
}

/// The GPUs of this host and their links (driver initialised by the caller).
pub fn topology() -> Result<Topology> {
    let n = super::device_count()?;
    let nvml = Nvml::load();
    let mut gpus = Vec::new();
    let mut handles = Vec::new();
    for i in 0..n {
        let pci_bus_id = pci_bus_id(i)?;
        let handle = nvml.as_ref().and_then(|m| m.handle(&pci_bus_id));
        let nvlinks = match (&nvml, handle) {
            (Some(m), Some(h)) => Some(m.active_links(h)),
            _ => None,
        };
        handles.push(handle);
        gpus.push(GpuNode { ordinal: i, pci_bus_id, nvlinks });
    }
    let mut links = vec![vec![None; n as usize]; n as usize];
    for i in 0..n {
        for j in 0..n {
            if i == j {
                continue;
            }
            let attr = |a| -> Result<i32> {
                let mut v = 0;
                // SAFETY: writes one int for valid ordinals.
                check("cuDeviceGetP2PAttribute", unsafe {
                    sys::cuDeviceGetP2PAttribute(&mut v, a, i as i32, j as i32)
                })?;
                Ok(v)
            };
            use sys::CUdevice_P2PAttribute_enum as A;
            let nvlink = match (&nvml, handles[i as usize], handles[j as usize]) {
                (Some(m), Some(a), Some(b)) => m.nvlink_between(a, b),
                _ => None,
            };
            links[i as usize][j as usize] = Some(Link {
                peer_access: attr(A::CU_DEVICE_P2P_ATTRIBUTE_ACCESS_SUPPORTED)? != 0,
                native_atomics: attr(A::CU_DEVICE_P2P_ATTRIBUTE_NATIVE_ATOMIC_SUPPORTED)? != 0,
                perf_rank: attr(A::CU_DEVICE_P2P_ATTRIBUTE_PERFORMANCE_RANK)?,
                nvlink,
            });
        }
    }
    Ok(Topology { gpus, links })
}

type NvmlDevice = *mut c_void;

/// The few NVML calls `info` needs, loaded from `libnvidia-ml.so.1` at run time.
struct Nvml {
    _lib: libloading::Library,
    by_bus: unsafe extern "C" fn(*const c_char, *mut NvmlDevice) -> u32,
    link_state: unsafe extern "C" fn(NvmlDevice, u32, *mut u32) -> u32,
    p2p_status: unsafe extern "C" fn(NvmlDevice, NvmlDevice, u32, *mut u32) -> u32,
}

/// `NVML_NVLINK_MAX_LINKS`
const NVML_MAX_LINKS: u32 = 18;
/// `NVML_P2P_CAPS_INDEX_NVLINK`
const NVML_P2P_NVLINK: u32 = 2;

impl Nvml {
    fn load() -> Option<Nvml> {
        // SAFETY: loading NVML runs its (side-effect free) initialisers; the symbols are looked up
        // with the signatures of nvml.h and kept alive with the library.
        unsafe {
            let lib = libloading::Library::new("libnvidia-ml.so.1").ok()?;
            let init: libloading::Symbol<unsafe extern "C" fn() -> u32> = lib.get(b"nvmlInit_v2").ok()?;
            if init() != 0 {
                return None;
            }
            let by_bus = *lib.get(b"nvmlDeviceGetHandleByPciBusId_v2").ok()?;
            let link_state = *lib.get(b"nvmlDeviceGetNvLinkState").ok()?;
            let p2p_status = *lib.get(b"nvmlDeviceGetP2PStatus").ok()?;
            Some(Nvml { _lib: lib, by_bus, link_state, p2p_status })
        }
    }

    fn handle(&self, pci_bus_id: &str) -> Option<NvmlDevice> {
        let id = CString::new(pci_bus_id).ok()?;
        let mut h = std::ptr::null_mut();
        // SAFETY: NUL-terminated id; writes one handle.
        (unsafe { (self.by_bus)(id.as_ptr(), &mut h) } == 0).then_some(h)
    }

    fn active_links(&self, h: NvmlDevice) -> u32 {
        (0..NVML_MAX_LINKS)
            .filter(|&l| {
                let mut active = 0;
                // SAFETY: valid handle; writes one enum value (1 = enabled).
                unsafe { (self.link_state)(h, l, &mut active) == 0 && active == 1 }
            })
            .count() as u32
    }

    fn nvlink_between(&self, a: NvmlDevice, b: NvmlDevice) -> Option<bool> {
        let mut status = 0;
        // SAFETY: valid handles; writes one status value (0 = OK).
        (unsafe { (self.p2p_status)(a, b, NVML_P2P_NVLINK, &mut status) } == 0).then_some(status == 0)
    }
}
