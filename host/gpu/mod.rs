//! The host GPU runtime: device selection, the primary context, the embedded PTX module (loaded
//! once per device), streams, events, typed launches. Built on `cust` / `cust_raw`; every driver
//! call is checked and a failure names the call.
mod driver;
mod error;
pub mod kernels;
mod memory;
mod tensor_map;
pub mod topology;
mod watch;

pub(crate) use driver::write_u32_async;
pub use error::{GpuError, Result};
pub use kernels::Kernel;
pub(crate) use memory::drain_blocking_streams;
pub(crate) use memory::{leak_instead, record_drop_failure};
pub use memory::{leaked_frees, take_drop_errors, DeviceBuffer, DeviceSlice, MappedBuffer};
pub use tensor_map::{EncodeTensorMap, L2Promotion, Swizzle, TensorMap, Tile2d, Tile4d, TmaDtype};
pub use watch::{StreamBound, RUN_ALLOWANCE};

use bytemuck::Pod;
use cust::context::Context;
use cust::device::{Device, DeviceAttribute};
use cust::event::{Event, EventFlags};
use cust::stream::{Stream, StreamFlags, StreamWaitEventFlags};
use cust_raw as sys;
pub(crate) use error::check as check_raw;
use error::check;
pub(crate) use error::cust_err;
use std::collections::HashMap;
use std::ffi::{c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// What a device is.
#[derive(Clone, Debug)]
pub struct DeviceInfo {
    /// CUDA ordinal.
    pub ordinal: u32,
    /// The driver's name for it (`NVIDIA H100 80GB HBM3`, ...).
    pub name: String,
    /// (major, minor): `(9, 0)` on Hopper, the only architecture the PTX module targets.
    pub compute_capability: (u32, u32),
    /// Streaming multiprocessors (persistent kernels size their grids by it).
    pub sm_count: u32,
    /// Device memory in bytes.
    pub total_memory: usize,
    /// L2 cache in bytes.
    pub l2_bytes: u32,
    /// Largest dynamic shared memory a block may opt in to.
    pub max_smem_per_block: u32,
    /// Peak SM clock in kHz (the driver's `CLOCK_RATE` attribute, not the current clock).
    pub clock_khz: u32,
    /// The CUDA driver's version, e.g. 12040 for 12.4.
    pub driver_version: i32,
    /// How long loading the module took (JIT-compiling it, when it came from the PTX).
    pub module_load: Duration,
    /// What was loaded: the embedded cubin or the PTX.
    pub module_source: ModuleSource,
}

/// How the kernels reached the device.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModuleSource {
    /// The cubin build.rs assembled ([`kernels::CUBIN`]).
    Cubin,
    /// The PTX, JIT-compiled by the driver: there was no cubin, `MKERNEL_JIT=1` asked for the
    /// JIT, or the driver refused the cubin (`why`).
    Jit {
        /// Why not the cubin.
        why: String,
    },
    /// A module image read from the file `MKERNEL_MODULE` names (a cubin or PTX of this build's
    /// device crate, for instance a variant of a kernel under study), in place of the embedded one.
    File {
        /// The file.
        path: String,
    },
}

impl std::fmt::Display for ModuleSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ModuleSource::Cubin => write!(f, "cubin from {}", kernels::CUBIN_PTXAS),
            ModuleSource::Jit { why } => write!(f, "PTX, JIT-compiled ({why})"),
            ModuleSource::File { path } => write!(f, "{path} (MKERNEL_MODULE)"),
        }
    }
}

struct Function {
    raw: sys::CUfunction,
    smem_limit: u32,
}

struct DeviceState {
    ctx: Context,
    module: sys::CUmodule,
    functions: Mutex<HashMap<&'static str, Function>>,
    info: DeviceInfo,
}

impl DeviceState {
    /// Make this device's context current on the calling thread.
    fn make_current(&self) -> Result<()> {
        // SAFETY: the context is alive for as long as `self`.
        check("cuCtxSetCurrent", unsafe { sys::cuCtxSetCurrent(self.ctx.as_raw()) })
    }
}

// SAFETY: CUDA contexts, modules and functions are thread-safe driver handles.
unsafe impl Send for DeviceState {}
// SAFETY: as for Send; the mutable parts (the function table) sit behind a mutex.
unsafe impl Sync for DeviceState {}

fn devices() -> &'static Mutex<HashMap<u32, Arc<DeviceState>>> {
    static D: OnceLock<Mutex<HashMap<u32, Arc<DeviceState>>>> = OnceLock::new();
    D.get_or_init(Default::default)
}

/// Initialise the driver; `NoDevice` where there is no driver or GPU.
fn init() -> Result<()> {
    match cust::init(cust::CudaFlags::empty()) {
        Ok(()) => Ok(()),
        Err(e) if e as u32 == error::NO_DEVICE || e as u32 == 35 || e as u32 == 999 => {
            Err(GpuError::NoDevice(format!("cuInit: {e}")))
        }
        Err(e) => Err(cust_err("cuInit")(e)),
    }
}

/// Number of CUDA devices (0 where there is no driver).
pub fn device_count() -> Result<u32> {
    match init() {
        Ok(()) => Device::num_devices().map_err(cust_err("cuDeviceGetCount")),
        Err(e) if e.is_no_device() => Ok(0),
        Err(e) => Err(e),
    }
}

/// Load the embedded module into the current context: the cubin where there is one and the
/// driver takes it (a driver older than the assembler refuses it), else the PTX through the JIT.
/// `MKERNEL_MODULE=<file>` loads that cubin or PTX instead (and wins over `MKERNEL_JIT`): kernel
/// variants built from the same device crate can then be timed side by side without rebuilding
/// the host. The variant must keep this build's parameter blocks and launch shapes (threads,
/// shared memory, consumer warpgroups: `kernels_info`), or its kernels hang or compute garbage.
fn load_module() -> Result<(sys::CUmodule, ModuleSource)> {
    if let Some(path) = std::env::var_os("MKERNEL_MODULE").filter(|p| !p.is_empty()) {
        let shown = path.to_string_lossy().into_owned();
        let mut image = std::fs::read(&path)
            .map_err(|e| GpuError::Module(format!("MKERNEL_MODULE={shown}: cannot read it: {e}")))?;
        image.push(0); // PTX is text the driver reads up to a NUL; a cubin ignores the extra byte
        let module = load_image(&image, "cuModuleLoadData (MKERNEL_MODULE)")
            .map_err(|e| GpuError::Module(format!("MKERNEL_MODULE={shown}: the driver refused it: {e}")))?;
        return Ok((module, ModuleSource::File { path: shown }));
    }
    let why = if kernels::CUBIN.is_empty() {
        "the build found no ptxas".to_string()
    } else if std::env::var("MKERNEL_JIT").is_ok_and(|v| v == "1") {
        "MKERNEL_JIT=1".to_string()
    } else {
        match load_image(kernels::CUBIN, "cuModuleLoadData (cubin)") {
            Ok(module) => return Ok((module, ModuleSource::Cubin)),
            Err(e) => format!("the driver refused the cubin: {e}"),
        }
    };
    Ok((load_ptx()?, ModuleSource::Jit { why }))
}

/// Load a module image (a cubin, or PTX ending in a NUL) into the current context; `call` names
/// the load in the error.
fn load_image(image: &[u8], call: &'static str) -> Result<sys::CUmodule> {
    let mut module = std::ptr::null_mut();
    // SAFETY: the image is a whole cubin or NUL-terminated PTX that outlives the call.
    let r = unsafe { sys::cuModuleLoadData(&mut module, image.as_ptr().cast()) };
    check(call, r)?;
    Ok(module)
}

/// Load the embedded PTX into the current context, with the JIT's error log on failure.
fn load_ptx() -> Result<sys::CUmodule> {
    let ptx = CString::new(kernels::PTX).map_err(|_| GpuError::Module("PTX contains a NUL byte".into()))?;
    let mut log = vec![0u8; 16 << 10];
    let mut opts = [sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER, sys::CUjit_option::CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES];
    let mut vals: [*mut c_void; 2] = [log.as_mut_ptr().cast(), log.len() as *mut c_void];
    let mut module = std::ptr::null_mut();
    // SAFETY: the option arrays have matching lengths and outlive the call.
    let r =
        unsafe { sys::cuModuleLoadDataEx(&mut module, ptx.as_ptr().cast(), 2, opts.as_mut_ptr(), vals.as_mut_ptr()) };
    if r as u32 != 0 {
        let text = String::from_utf8_lossy(&log);
        let text = text.trim_end_matches('\0').trim();
        let err = check("cuModuleLoadDataEx", r).unwrap_err();
        return Err(GpuError::Module(format!("{err}; JIT log: {}", if text.is_empty() { "(empty)" } else { text })));
    }
    Ok(module)
}

fn open_device(ordinal: u32) -> Result<DeviceState> {
    init()?;
    let count = Device::num_devices().map_err(cust_err("cuDeviceGetCount"))?;
    if ordinal >= count {
        return Err(GpuError::NoDevice(format!("device {ordinal} requested, {count} present")));
    }
    let device = Device::get_device(ordinal).map_err(cust_err("cuDeviceGet"))?;
    let attr = |a| device.get_attribute(a).map_err(cust_err("cuDeviceGetAttribute"));
    let cc =
        (attr(DeviceAttribute::ComputeCapabilityMajor)? as u32, attr(DeviceAttribute::ComputeCapabilityMinor)? as u32);
    let ctx = Context::new(device).map_err(cust_err("cuDevicePrimaryCtxRetain"))?;
    let mut driver_version = 0;
    // SAFETY: writes one int.
    check("cuDriverGetVersion", unsafe { sys::cuDriverGetVersion(&mut driver_version) })?;
    let started = Instant::now();
    let (module, module_source) = load_module()?;
    let module_load = started.elapsed();
    let mut functions = HashMap::new();
    for &name in kernels::ALL {
        let mut f = std::ptr::null_mut();
        let cname = CString::new(name).unwrap();
        // SAFETY: module is loaded; f is written on success.
        check("cuModuleGetFunction", unsafe { sys::cuModuleGetFunction(&mut f, module, cname.as_ptr()) })
            .map_err(|e| GpuError::Module(format!("kernel `{name}` not found in the PTX module: {e}")))?;
        functions.insert(name, Function { raw: f, smem_limit: 48 << 10 });
    }
    let info = DeviceInfo {
        ordinal,
        name: device.name().map_err(cust_err("cuDeviceGetName"))?,
        compute_capability: cc,
        sm_count: attr(DeviceAttribute::MultiprocessorCount)? as u32,
        total_memory: device.total_memory().map_err(cust_err("cuDeviceTotalMem"))?,
        l2_bytes: attr(DeviceAttribute::L2CacheSize)? as u32,
        max_smem_per_block: {
            let mut v = 0;
            let a = sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN;
            // SAFETY: writes one int for a valid device.
            check("cuDeviceGetAttribute", unsafe { sys::cuDeviceGetAttribute(&mut v, a, device.as_raw()) })?;
            v as u32
        },
        clock_khz: attr(DeviceAttribute::ClockRate)? as u32,
        driver_version,
        module_load,
        module_source,
    };
    Ok(DeviceState { ctx, module, functions: Mutex::new(functions), info })
}

/// Export `[addr, addr + len)` of device memory as a dma-buf file descriptor (for RDMA
/// registration). The caller owns (and closes) the descriptor.
pub fn dmabuf_fd(addr: u64, len: u64) -> Result<i32> {
    let get = driver::cuda12()?
        .mem_get_handle_for_address_range
        .ok_or(GpuError::MissingEntryPoint("cuMemGetHandleForAddressRange"))?;
    let mut fd: i32 = -1;
    // CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD = 1
    // SAFETY: writes one int; the range must be device memory of the current context.
    check("cuMemGetHandleForAddressRange", unsafe { get((&mut fd as *mut i32).cast(), addr, len as usize, 1, 0) })?;
    Ok(fd)
}

/// Grid, block, dynamic shared memory and (optionally) cluster shape of a launch.
#[derive(Clone, Copy, Debug)]
pub struct LaunchConfig {
    /// CTAs in x, y, z (each at least 1).
    pub grid: [u32; 3],
    /// Threads per CTA in x, y, z (1..=1024 in all).
    pub block: [u32; 3],
    /// Dynamic shared memory per CTA in bytes; above 48 KiB the launch opts the kernel in first.
    pub smem_bytes: u32,
    /// Thread-block cluster shape (must divide `grid`); `None`: no clusters.
    pub cluster: Option<[u32; 3]>,
}

impl LaunchConfig {
    /// A 1-D launch.
    pub fn linear(grid: u32, block: u32, smem_bytes: u32) -> Self {
        Self { grid: [grid, 1, 1], block: [block, 1, 1], smem_bytes, cluster: None }
    }
}

/// Make device `ordinal`'s context current on the calling thread, as any method of a [`Gpu`] of
/// it does (for code that holds no handle: the communicator's heap). An error when no `Gpu` of
/// it was made in this process.
pub(crate) fn make_device_current(ordinal: u32) -> Result<()> {
    let state = devices().lock().unwrap_or_else(|p| p.into_inner()).get(&ordinal).cloned();
    let state = state.ok_or_else(|| GpuError::InvalidArgument {
        arg: "device",
        rule: format!("device {ordinal} was never opened by a Gpu in this process"),
    })?;
    state.make_current()
}

/// A handle on one GPU: its (shared, primary) context and module, plus a stream of its own.
/// Cheap to create once the device is open; make one per thread that launches work.
pub struct Gpu {
    state: Arc<DeviceState>,
    stream: Stream,
    /// Launches enqueued on `stream`, and how many of them a wait saw finish (the bound of
    /// [`Gpu::synchronize_bounded`] scales with the difference).
    launched: AtomicU64,
    drained: AtomicU64,
}

impl Gpu {
    /// Open device `ordinal`, loading the PTX module the first time.
    pub fn new(ordinal: u32) -> Result<Gpu> {
        let state = {
            let mut map = devices().lock().unwrap_or_else(|p| p.into_inner());
            match map.get(&ordinal) {
                Some(s) => s.clone(),
                None => {
                    let s = Arc::new(open_device(ordinal)?);
                    map.insert(ordinal, s.clone());
                    s
                }
            }
        };
        state.make_current()?;
        // A blocking stream: the synchronous copies and memsets of `DeviceBuffer` run on the legacy
        // default stream, and a blocking stream orders them before (and after) its own launches.
        // (A non-blocking stream could start a kernel before its inputs or tensor maps landed.)
        let stream = Stream::new(StreamFlags::DEFAULT, None).map_err(cust_err("cuStreamCreate"))?;
        Ok(Gpu { state, stream, launched: AtomicU64::new(0), drained: AtomicU64::new(0) })
    }

    /// Make this GPU's context current on the calling thread (every method does it first).
    pub fn make_current(&self) -> Result<()> {
        self.state.make_current()
    }

    /// What this device is.
    pub fn info(&self) -> &DeviceInfo {
        &self.state.info
    }

    /// This handle's stream.
    pub fn stream(&self) -> &Stream {
        &self.stream
    }

    /// Wait for everything queued on this handle's stream (with no bound: ops wait through
    /// [`Gpu::synchronize_bounded`]).
    pub fn synchronize(&self) -> Result<()> {
        let launched = self.launched.load(Ordering::Relaxed);
        self.stream.synchronize().map_err(cust_err("cuStreamSynchronize"))?;
        self.drained.fetch_max(launched, Ordering::Relaxed);
        Ok(())
    }

    /// Wait for this handle's stream, but give up after `limit` with [`GpuError::StreamTimeout`]
    /// instead of blocking forever on a stuck kernel.
    pub fn synchronize_timeout(&self, limit: Duration) -> Result<()> {
        self.poll_stream(|busy| (busy > limit).then_some(GpuError::StreamTimeout(limit)))
    }

    /// Allocate `len` uninitialised elements.
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        self.make_current()?;
        DeviceBuffer::uninit(len)
    }

    /// Whether operands totalling `elements` of `elem_bytes` each (`None`: the count overflowed)
    /// fit this device's memory: checked before the host generates data for them, so an
    /// impossible size is a typed error naming `what`, not an allocation that aborts.
    pub fn check_fits(&self, what: &'static str, elements: Option<usize>, elem_bytes: usize) -> Result<()> {
        let have = self.info().total_memory;
        match elements.and_then(|n| n.checked_mul(elem_bytes)) {
            Some(bytes) if bytes <= have => Ok(()),
            need => Err(GpuError::InvalidArgument {
                arg: what,
                rule: match need {
                    Some(b) => format!("its operands need {b} bytes; the GPU has {have}"),
                    None => "its operand sizes overflow a 64-bit byte count".to_string(),
                },
            }),
        }
    }

    /// Allocate and fill from the host.
    pub fn upload<T: Pod>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        self.make_current()?;
        DeviceBuffer::from_slice(data)
    }

    /// Free and total device memory in bytes (`cuMemGetInfo`), as the driver sees them now.
    pub fn memory_info(&self) -> Result<(u64, u64)> {
        self.make_current()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: both pointers are live locals; the context is current.
        check("cuMemGetInfo", unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) })?;
        Ok((free as u64, total as u64))
    }

    /// Allocate `len` zeroed elements of pinned host memory mapped into this GPU.
    pub fn mapped<T: Pod>(&self, len: usize) -> Result<MappedBuffer<T>> {
        self.make_current()?;
        MappedBuffer::zeroed(len)
    }

    /// Encode tensor maps and copy them to device memory (kernels take `addr() + 128 * i`).
    pub fn upload_tensor_maps<T: EncodeTensorMap>(&self, tiles: &[T]) -> Result<DeviceBuffer<TensorMap>> {
        self.make_current()?;
        let maps = tiles.iter().map(|t| t.encode_map()).collect::<Result<Vec<_>>>()?;
        DeviceBuffer::from_slice(&maps)
    }

    /// The loaded module's global variable `name` as elements of `T`, or `None` where the module
    /// has no such symbol (diagnostic buffers exist only in diagnostic modules, e.g. the `trace`
    /// feature's). A size that is not a whole number of `T`s is an error.
    pub fn module_global<T: Pod>(&self, name: &str) -> Result<Option<DeviceSlice<'_, T>>> {
        self.make_current()?;
        let cname = CString::new(name)
            .map_err(|_| GpuError::InvalidArgument { arg: "name", rule: format!("{name:?} holds a NUL byte") })?;
        let (mut ptr, mut bytes) = (0u64, 0usize);
        // SAFETY: the module is loaded in this context; the call writes two values on success.
        let r = unsafe { sys::cuModuleGetGlobal_v2(&mut ptr, &mut bytes, self.state.module, cname.as_ptr()) };
        if r == sys::CUresult::CUDA_ERROR_NOT_FOUND {
            return Ok(None);
        }
        check("cuModuleGetGlobal", r)?;
        let elem = std::mem::size_of::<T>();
        if bytes % elem != 0 {
            return Err(GpuError::Module(format!("global `{name}` has {bytes} bytes, not a whole number of {elem}")));
        }
        // SAFETY: the module's global, alive while the module is (as long as this context).
        Ok(Some(unsafe { DeviceSlice::from_raw(ptr, bytes / elem) }))
    }

    fn function(&self, name: &'static str, smem_bytes: u32) -> Result<sys::CUfunction> {
        let mut fns = self.state.functions.lock().unwrap_or_else(|p| p.into_inner());
        let f = fns.get_mut(name).ok_or_else(|| GpuError::Module(format!("unknown kernel `{name}`")))?;
        if smem_bytes > f.smem_limit {
            let max = self.state.info.max_smem_per_block;
            if smem_bytes > max {
                return Err(GpuError::InvalidArgument {
                    arg: "smem_bytes",
                    rule: format!(
                        "{name} asks for {smem_bytes} bytes of shared memory; this GPU allows {max} per block"
                    ),
                });
            }
            let attr = sys::CUfunction_attribute_enum::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES;
            // SAFETY: valid function handle and attribute.
            check("cuFuncSetAttribute", unsafe { sys::cuFuncSetAttribute(f.raw, attr, smem_bytes as i32) })?;
            f.smem_limit = smem_bytes;
        }
        Ok(f.raw)
    }

    /// Launch `kernel` on this handle's stream with `params` as its single parameter.
    ///
    /// # Safety
    /// Every address inside `params` must point to memory that stays valid (and is not freed or
    /// otherwise used in conflicting ways) until the kernel completes, with the sizes and layouts
    /// the kernel's parameter block documents.
    pub unsafe fn launch<P: Pod>(&self, kernel: Kernel<P>, cfg: &LaunchConfig, params: &P) -> Result<()> {
        self.make_current()?;
        let threads = cfg.block.iter().product::<u32>();
        if threads == 0 || threads > 1024 {
            return Err(GpuError::InvalidArgument {
                arg: "block",
                rule: format!("{threads} threads per block; must be 1..=1024"),
            });
        }
        if cfg.grid.contains(&0) {
            return Err(GpuError::InvalidArgument {
                arg: "grid",
                rule: "every grid dimension must be at least 1".into(),
            });
        }
        let f = self.function(kernel.name, cfg.smem_bytes)?;
        let mut args = [params as *const P as *mut c_void];
        self.launched.fetch_add(1, Ordering::Relaxed);
        match cfg.cluster {
            None => check(
                "cuLaunchKernel",
                sys::cuLaunchKernel(
                    f,
                    cfg.grid[0],
                    cfg.grid[1],
                    cfg.grid[2],
                    cfg.block[0],
                    cfg.block[1],
                    cfg.block[2],
                    cfg.smem_bytes,
                    self.stream.as_inner(),
                    args.as_mut_ptr(),
                    std::ptr::null_mut(),
                ),
            ),
            Some(c) => {
                if cfg.grid.iter().zip(c.iter()).any(|(g, c)| *c == 0 || g % c != 0) {
                    return Err(GpuError::InvalidArgument {
                        arg: "cluster",
                        rule: format!("cluster {c:?} must divide grid {:?}", cfg.grid),
                    });
                }
                let mut attr =
                    driver::LaunchAttribute { id: driver::LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION, pad: 0, value: [0; 16] };
                attr.value[..3].copy_from_slice(&c);
                let raw = driver::LaunchConfigRaw {
                    grid: cfg.grid,
                    block: cfg.block,
                    shared_mem_bytes: cfg.smem_bytes,
                    stream: self.stream.as_inner(),
                    attrs: &mut attr,
                    num_attrs: 1,
                };
                let api = driver::cuda12()?;
                check("cuLaunchKernelEx", (api.launch_kernel_ex)(&raw, f, args.as_mut_ptr(), std::ptr::null_mut()))
            }
        }
    }

    /// Enqueue a device-to-device copy of `bytes` on this handle's stream (the copy engine; `dst`
    /// may be a peer's memory mapped here).
    ///
    /// # Safety
    /// `src..src + bytes` and `dst..dst + bytes` are device memory valid until the copy completes.
    pub unsafe fn copy_async(&self, dst: u64, src: u64, bytes: usize) -> Result<()> {
        self.make_current()?;
        check("cuMemcpyDtoDAsync", sys::cuMemcpyDtoDAsync_v2(dst, src, bytes, self.stream.as_inner()))
    }

    /// Let this device's kernels and copies reach `peer`'s memory directly (peer access from
    /// this context; already enabled is fine).
    pub fn enable_peer_access(&self, peer: &Gpu) -> Result<()> {
        self.make_current()?;
        // SAFETY: both contexts are alive for the call.
        let r = unsafe { sys::cuCtxEnablePeerAccess(peer.state.ctx.as_raw(), 0) };
        if r == sys::cudaError_enum::CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED {
            return Ok(());
        }
        check("cuCtxEnablePeerAccess", r)
    }

    /// Enqueue a hold on this handle's stream until the device word at `addr` reaches `value`
    /// (a stream memory operation, no kernel: a persistent kernel on another stream may raise
    /// it); [`Gpu::write_value_async`] sets such a word.
    ///
    /// # Safety
    /// `addr` is a live, 4-byte-aligned device word that nothing frees before the wait is over.
    pub unsafe fn wait_value_async(&self, addr: u64, value: u32) -> Result<()> {
        self.make_current()?;
        driver::wait_u32_geq_async(&self.stream, addr, value)
    }

    /// Enqueue writing `value` into the device word at `addr` on this handle's stream, once the
    /// work before it is done (a stream memory operation, no kernel).
    ///
    /// # Safety
    /// As [`Gpu::wait_value_async`].
    pub unsafe fn write_value_async(&self, addr: u64, value: u32) -> Result<()> {
        self.make_current()?;
        driver::write_u32_async(&self.stream, addr, value)
    }

    /// Enqueue setting `bytes` bytes at `dst` to `byte` on this handle's stream (poisoning an
    /// output between launches without a host wait; CUDA graphs capture it).
    ///
    /// # Safety
    /// `dst..dst + bytes` is device memory valid until the fill completes.
    pub unsafe fn fill_async(&self, dst: u64, byte: u8, bytes: usize) -> Result<()> {
        self.make_current()?;
        check("cuMemsetD8Async", sys::cuMemsetD8Async(dst, byte, bytes, self.stream.as_inner()))
    }

    /// Record the work `work` enqueues on this handle's stream into a CUDA graph (nothing runs
    /// while capturing); replay it with [`Graph::launch`]. Kernels whose epochs come from device
    /// counters (every mkernel op) are correct under replay.
    ///
    /// The graph keeps the borrows of `work` (its lifetime `'w`): a replay reads the buffers and
    /// parameter blocks the recorded launches named, so the graph cannot outlive the op or
    /// buffers the closure borrowed.
    ///
    /// ```compile_fail
    /// # fn f(gpu: &mkernel::Gpu) -> mkernel::gpu::Result<()> {
    /// let graph = {
    ///     let out = gpu.alloc::<u8>(1 << 20)?;
    ///     // SAFETY: `out` outlives the fill... only if the graph cannot outlive `out`.
    ///     gpu.capture(|| unsafe { gpu.fill_async(out.addr(), 0, 1 << 20) })?
    /// }; // `out` is freed here: the graph may not escape
    /// graph.launch(gpu)
    /// # }
    /// ```
    pub fn capture<'w>(&self, work: impl FnOnce() -> Result<()> + 'w) -> Result<Graph<'w>> {
        self.make_current()?;
        let stream = self.stream.as_inner();
        let relaxed = sys::CUstreamCaptureMode_enum::CU_STREAM_CAPTURE_MODE_RELAXED;
        // SAFETY: a valid stream of this context.
        check("cuStreamBeginCapture", unsafe { sys::cuStreamBeginCapture_v2(stream, relaxed) })?;
        let before = self.launched.load(Ordering::Relaxed);
        let enqueued = work();
        // The launches `work` made were recorded, not queued: each replay queues them instead.
        let kernels = self.launched.load(Ordering::Relaxed).wrapping_sub(before);
        self.launched.fetch_sub(kernels, Ordering::Relaxed);
        let mut graph = std::ptr::null_mut();
        // SAFETY: ends the capture begun above (also after a failed enqueue, to leave the stream usable).
        let ended = check("cuStreamEndCapture", unsafe { sys::cuStreamEndCapture(stream, &mut graph) });
        enqueued?;
        ended?;
        let mut exec = std::ptr::null_mut();
        // SAFETY: graph came from the capture; exec is written on success.
        let r = check("cuGraphInstantiateWithFlags", unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, graph, 0) });
        if let Err(e) = r {
            // SAFETY: destroying the graph we own.
            unsafe { sys::cuGraphDestroy(graph) };
            return Err(e);
        }
        Ok(Graph { graph, exec, kernels: kernels.max(1), _work: std::marker::PhantomData })
    }

    /// Make work enqueued on this handle's stream from now on wait for everything enqueued on
    /// `other`'s so far (an event recorded there). Handles of one device have streams of their
    /// own, so this forks work onto several streams and joins it back.
    pub fn wait_for(&self, other: &Gpu) -> Result<()> {
        self.make_current()?;
        let done = Event::new(EventFlags::DISABLE_TIMING).map_err(cust_err("cuEventCreate"))?;
        done.record(&other.stream).map_err(cust_err("cuEventRecord"))?;
        self.stream.wait_event(done, StreamWaitEventFlags::DEFAULT).map_err(cust_err("cuStreamWaitEvent"))
    }

    /// Time `work` (which enqueues on this handle's stream) with CUDA events; milliseconds. The
    /// wait for the stop event is bounded by [`StreamBound::UNKNOWN`].
    pub fn time_ms<F: FnMut() -> Result<()>>(&self, mut work: F) -> Result<f32> {
        self.make_current()?;
        let start = Event::new(EventFlags::DEFAULT).map_err(cust_err("cuEventCreate"))?;
        let stop = Event::new(EventFlags::DEFAULT).map_err(cust_err("cuEventCreate"))?;
        start.record(&self.stream).map_err(cust_err("cuEventRecord"))?;
        work()?;
        stop.record(&self.stream).map_err(cust_err("cuEventRecord"))?;
        // The stop event is the stream's last work: once the stream drained it has completed.
        self.synchronize_bounded(StreamBound::UNKNOWN, || false)?;
        stop.synchronize().map_err(cust_err("cuEventSynchronize"))?;
        stop.elapsed_time_f32(&start).map_err(cust_err("cuEventElapsedTime"))
    }
}

/// A captured, instantiated CUDA graph (see [`Gpu::capture`]), valid while what its recorded
/// work borrowed (`'w`) is.
pub struct Graph<'w> {
    graph: sys::CUgraph,
    exec: sys::CUgraphExec,
    /// Launches on the capturing handle's stream that a replay queues (the bounded wait's count).
    kernels: u64,
    _work: std::marker::PhantomData<&'w ()>,
}

impl Graph<'_> {
    /// Replay the graph on `gpu`'s stream (asynchronous).
    pub fn launch(&self, gpu: &Gpu) -> Result<()> {
        gpu.make_current()?;
        gpu.launched.fetch_add(self.kernels, Ordering::Relaxed);
        // SAFETY: a live executable graph and a valid stream.
        check("cuGraphLaunch", unsafe { sys::cuGraphLaunch(self.exec, gpu.stream.as_inner()) })
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        // SAFETY: both handles are ours and destroyed once; failures (a dead context) leave
        // nothing to do, so they are ignored rather than turned into a panic.
        unsafe {
            sys::cuGraphExecDestroy(self.exec);
            sys::cuGraphDestroy(self.graph);
        }
    }
}

impl Drop for DeviceState {
    fn drop(&mut self) {
        // SAFETY: the module was loaded into this context and is unloaded once.
        unsafe { sys::cuModuleUnload(self.module) };
    }
}
