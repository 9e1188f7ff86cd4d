//! The GPU layer's error type: every driver call is checked and a failure names the call.
use cust_raw as sys;
use std::ffi::CStr;

/// An error from the GPU runtime layer.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GpuError {
    /// A CUDA driver call failed.
    #[error("{call} failed: {name} ({code}): {description}")]
    Driver {
        /// The driver function (`cuMemAlloc`, `cuLaunchKernel`, ...).
        call: &'static str,
        /// Its `CUresult` (100: `CUDA_ERROR_NO_DEVICE`).
        code: u32,
        /// The result's name (`CUDA_ERROR_OUT_OF_MEMORY`, ...).
        name: String,
        /// The driver's description of the result.
        description: String,
    },
    /// No usable CUDA device: no driver, no GPU, or the ordinal does not exist.
    #[error("no CUDA device: {0}")]
    NoDevice(String),
    /// An argument broke a rule; nothing was launched.
    #[error("invalid argument `{arg}`: {rule}")]
    InvalidArgument {
        /// The argument's name.
        arg: &'static str,
        /// The rule it broke, with the value.
        rule: String,
    },
    /// The embedded PTX module could not be loaded (the JIT log is included).
    #[error("loading the mkernel PTX module failed: {0}")]
    Module(String),
    /// Work on a stream did not finish within the caller's bound.
    #[error("stream work still running after {0:?} (a kernel may be stuck)")]
    StreamTimeout(std::time::Duration),
    /// A stream stayed busy past its [`super::StreamBound`]: some kernel is stuck where no wait
    /// is bounded. The stream cannot drain; this process leaks its GPU memory from now on.
    #[error(
        "a kernel is stuck: its stream is still busy after {busy:?} ({pending} launch(es) queued{}); \
         a CTA waits where nothing is bounded, and the stream cannot drain (end the process)",
        after_report.map(|r| format!(", {r:?} after a device wait reported")).unwrap_or_default()
    )]
    KernelStuck {
        /// How long the wait lasted.
        busy: std::time::Duration,
        /// Launches queued when it began.
        pending: u64,
        /// How long after a device wait's report it gave up (`None`: no report was seen).
        after_report: Option<std::time::Duration>,
    },
    /// Frees failed inside `Drop` (usually after a device trap broke the context).
    #[error("{count} free(s) failed while dropping GPU memory; the last: {last}")]
    DropFailed {
        /// How many failed since the last check.
        count: u64,
        /// The last failure.
        last: String,
    },
    /// A synchronous copy or memset refused after a stream was found stuck
    /// ([`GpuError::KernelStuck`]): it waits for the context's earlier work, so it would wait
    /// behind the stuck kernel forever.
    #[error("{call} refused: a kernel of this process is stuck (reported earlier), and {call} would wait behind it forever (end the process)")]
    Stuck {
        /// The driver call not made.
        call: &'static str,
    },
    /// A CUDA 12 entry point is missing from the installed driver.
    #[error("the CUDA driver has no `{0}` (needs a CUDA 12+ driver)")]
    MissingEntryPoint(&'static str),
}

/// Result of the GPU layer.
pub type Result<T, E = GpuError> = std::result::Result<T, E>;

/// CUDA_ERROR_NO_DEVICE
pub(crate) const NO_DEVICE: u32 = 100;

fn driver_error(call: &'static str, r: sys::CUresult) -> GpuError {
    let code = r as u32;
    let mut name: *const std::os::raw::c_char = std::ptr::null();
    let mut desc: *const std::os::raw::c_char = std::ptr::null();
    // SAFETY: both functions only write a pointer to a static string (or leave it null).
    let (name, description) = unsafe {
        sys::cuGetErrorName(r, &mut name);
        sys::cuGetErrorString(r, &mut desc);
        let s = |p: *const std::os::raw::c_char| {
            if p.is_null() {
                "unknown error".to_string()
            } else {
                CStr::from_ptr(p).to_string_lossy().into_owned()
            }
        };
        (s(name), s(desc))
    };
    GpuError::Driver { call, code, name, description }
}

/// Check a raw driver result, naming the call on failure.
pub(crate) fn check(call: &'static str, r: sys::CUresult) -> Result<()> {
    if r as u32 == 0 {
        Ok(())
    } else {
        Err(driver_error(call, r))
    }
}

/// Convert a `cust` error, naming the call.
pub(crate) fn cust_err(call: &'static str) -> impl FnOnce(cust::error::CudaError) -> GpuError {
    move |e| GpuError::Driver { call, code: e as u32, name: format!("{e:?}"), description: e.to_string() }
}

impl GpuError {
    /// True when the error means "there is no GPU here" rather than a fault.
    pub fn is_no_device(&self) -> bool {
        match self {
            GpuError::NoDevice(_) => true,
            GpuError::Driver { code, .. } => *code == NO_DEVICE,
            _ => false,
        }
    }
}
