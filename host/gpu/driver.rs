//! CUDA 12 driver entry points that `cust_raw` (CUDA 11.4 bindings) lacks, fetched at run time
//! with `cuGetProcAddress`, so no newer headers or link-time symbols are needed.
use super::error::{check, GpuError, Result};
use cust_raw as sys;
use std::ffi::{c_void, CStr};
use std::sync::OnceLock;

pub(crate) type TensorMapEncodeTiled = unsafe extern "C" fn(
    tensor_map: *mut c_void,
    dtype: u32,
    rank: u32,
    global_address: *mut c_void,
    global_dim: *const u64,
    global_strides: *const u64,
    box_dim: *const u32,
    element_strides: *const u32,
    interleave: u32,
    swizzle: u32,
    l2_promotion: u32,
    oob_fill: u32,
) -> sys::CUresult;

/// `CUlaunchAttribute`: an 4-byte id, padding to 8, a 64-byte value union.
#[repr(C)]
#[derive(Clone, Copy)]
pub(crate) struct LaunchAttribute {
    pub id: u32,
    pub pad: u32,
    pub value: [u32; 16],
}

/// `CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`
pub(crate) const LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION: u32 = 4;

/// `CUlaunchConfig`
#[repr(C)]
pub(crate) struct LaunchConfigRaw {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_mem_bytes: u32,
    pub stream: sys::CUstream,
    pub attrs: *mut LaunchAttribute,
    pub num_attrs: u32,
}

pub(crate) type LaunchKernelEx = unsafe extern "C" fn(
    config: *const LaunchConfigRaw,
    f: sys::CUfunction,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> sys::CUresult;

/// `cuStreamWriteValue32` (the CUDA 12 `_v2` entry point, which needs no driver option).
pub(crate) type StreamWriteValue32 =
    unsafe extern "C" fn(stream: sys::CUstream, addr: sys::CUdeviceptr, value: u32, flags: u32) -> sys::CUresult;

/// `cuStreamWaitValue32` (the CUDA 12 `_v2` entry point).
pub(crate) type StreamWaitValue32 =
    unsafe extern "C" fn(stream: sys::CUstream, addr: sys::CUdeviceptr, value: u32, flags: u32) -> sys::CUresult;

pub(crate) type MemGetHandleForAddressRange =
    unsafe extern "C" fn(handle: *mut c_void, dptr: u64, size: usize, handle_type: u32, flags: u64) -> sys::CUresult;

/// The entry points, resolved once per process.
pub(crate) struct Cuda12 {
    pub tensor_map_encode_tiled: TensorMapEncodeTiled,
    pub launch_kernel_ex: LaunchKernelEx,
    pub stream_write_value32: StreamWriteValue32,
    pub stream_wait_value32: StreamWaitValue32,
    pub mem_get_handle_for_address_range: Option<MemGetHandleForAddressRange>,
}

fn proc_address(name: &'static CStr) -> Result<*mut c_void> {
    let mut p = std::ptr::null_mut();
    // SAFETY: writes a function pointer (or null) for a NUL-terminated symbol name.
    check("cuGetProcAddress", unsafe { sys::cuGetProcAddress(name.as_ptr(), &mut p, 12000, 0) })?;
    if p.is_null() {
        return Err(GpuError::MissingEntryPoint(name.to_str().unwrap_or("?")));
    }
    Ok(p)
}

/// Resolve (once) and return the CUDA 12 entry points. Needs `cuInit` to have succeeded.
pub(crate) fn cuda12() -> Result<&'static Cuda12> {
    static CELL: OnceLock<std::result::Result<Cuda12, String>> = OnceLock::new();
    let r = CELL.get_or_init(|| {
        let load = || -> Result<Cuda12> {
            // SAFETY: the driver returns pointers to functions with exactly these C signatures.
            unsafe {
                Ok(Cuda12 {
                    tensor_map_encode_tiled: std::mem::transmute::<*mut c_void, TensorMapEncodeTiled>(proc_address(
                        c"cuTensorMapEncodeTiled",
                    )?),
                    launch_kernel_ex: std::mem::transmute::<*mut c_void, LaunchKernelEx>(proc_address(
                        c"cuLaunchKernelEx",
                    )?),
                    stream_write_value32: std::mem::transmute::<*mut c_void, StreamWriteValue32>(proc_address(
                        c"cuStreamWriteValue32",
                    )?),
                    stream_wait_value32: std::mem::transmute::<*mut c_void, StreamWaitValue32>(proc_address(
                        c"cuStreamWaitValue32",
                    )?),
                    // Optional: only RDMA registration needs it.
                    mem_get_handle_for_address_range: proc_address(c"cuMemGetHandleForAddressRange")
                        .ok()
                        .map(|p| std::mem::transmute::<*mut c_void, MemGetHandleForAddressRange>(p)),
                })
            }
        };
        load().map_err(|e| e.to_string())
    });
    r.as_ref().map_err(|e| GpuError::Module(format!("resolving CUDA 12 entry points: {e}")))
}

/// Write `value` to the device word at `addr` once the work before it on `stream` is done, as a
/// stream memory operation: the front end writes it, no kernel runs, so it never waits for an SM
/// or behind a persistent kernel that shares the stream's hardware queue (a memset kernel can).
/// The default flags order the stream's earlier writes before it.
///
/// # Safety
/// `addr` is a live, 4-byte-aligned device word that nothing else frees before the write lands.
pub(crate) unsafe fn write_u32_async(stream: &cust::stream::Stream, addr: u64, value: u32) -> Result<()> {
    let f = cuda12()?.stream_write_value32;
    // SAFETY: the caller's contract; the stream is alive for the call.
    check("cuStreamWriteValue32", unsafe { f(stream.as_inner(), addr, value, 0) })
}

/// `CU_STREAM_WAIT_VALUE_GEQ`: wait until `(int32_t)(*addr - value) >= 0`.
const WAIT_VALUE_GEQ: u32 = 0;

/// Hold the work enqueued on `stream` after this until the device word at `addr` reaches
/// `value` (a stream memory operation: the front end polls it, no kernel runs, so a persistent
/// kernel on another stream may raise it).
///
/// # Safety
/// `addr` is a live, 4-byte-aligned device word that nothing frees before the wait is over.
pub(crate) unsafe fn wait_u32_geq_async(stream: &cust::stream::Stream, addr: u64, value: u32) -> Result<()> {
    let f = cuda12()?.stream_wait_value32;
    // SAFETY: the caller's contract; the stream is alive for the call.
    check("cuStreamWaitValue32", unsafe { f(stream.as_inner(), addr, value, WAIT_VALUE_GEQ) })
}
