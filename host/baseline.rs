//! Baselines for benchmarks: cuBLAS, loaded at run time (no link-time dependency), driven on the
//! same stream and context as mkernel so both are timed side by side in one process.
use crate::gemm::{BLayout, GemmShape};
use crate::gpu::{DeviceBuffer, Gpu};
use half::bf16;
use libloading::{Library, Symbol};
use std::ffi::c_void;

type Handle = *mut c_void;
type CreateFn = unsafe extern "C" fn(*mut Handle) -> i32;
type SetStreamFn = unsafe extern "C" fn(Handle, *mut c_void) -> i32;
#[allow(clippy::type_complexity)]
type GemmExFn = unsafe extern "C" fn(
    Handle,
    i32,
    i32,
    i32,
    i32,
    i32,
    *const c_void,
    *const c_void,
    i32,
    i32,
    *const c_void,
    i32,
    i32,
    *const c_void,
    *mut c_void,
    i32,
    i32,
    i32,
    i32,
) -> i32;

const CUDA_R_16BF: i32 = 14;
const CUBLAS_COMPUTE_32F: i32 = 68;
const CUBLAS_GEMM_DEFAULT: i32 = -1;
const OP_N: i32 = 0;
const OP_T: i32 = 1;

/// cuBLAS, opened from `MKERNEL_CUBLAS`, the loader's search path, or a CUDA / PyTorch install.
pub struct Cublas {
    _lib: Library,
    handle: Handle,
    gemm_ex: GemmExFn,
    /// Where the library was found.
    pub path: String,
}

fn candidates() -> Vec<String> {
    let mut v: Vec<String> = std::env::var("MKERNEL_CUBLAS").into_iter().collect();
    v.extend(["libcublas.so", "libcublas.so.13", "libcublas.so.12"].map(String::from));
    for dir in ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"] {
        v.push(format!("{dir}/libcublas.so"));
    }
    // PyTorch's wheels carry cuBLAS under site-packages/nvidia/*/lib.
    for root in ["/opt/torch/.venv/lib", "/usr/local/lib", "/usr/lib"] {
        if let Ok(entries) = std::fs::read_dir(root) {
            for py in entries.flatten() {
                for sub in ["cu13", "cublas"] {
                    for so in ["libcublas.so.13", "libcublas.so.12"] {
                        v.push(
                            py.path().join("site-packages/nvidia").join(sub).join("lib").join(so).display().to_string(),
                        );
                    }
                }
            }
        }
    }
    v
}

impl Cublas {
    /// Load cuBLAS and bind a handle to `gpu`'s stream.
    pub fn new(gpu: &Gpu) -> Result<Self, String> {
        gpu.make_current().map_err(|e| e.to_string())?;
        let mut tried = Vec::new();
        for c in candidates() {
            // SAFETY: loading a shared library runs its initialisers; cuBLAS's are benign.
            let lib = match unsafe { Library::new(&c) } {
                Ok(l) => l,
                Err(_) => {
                    tried.push(c);
                    continue;
                }
            };
            // SAFETY: the symbols have exactly these C signatures in cuBLAS 12 and 13.
            unsafe {
                let create: Symbol<CreateFn> = lib.get(b"cublasCreate_v2").map_err(|e| e.to_string())?;
                let set_stream: Symbol<SetStreamFn> = lib.get(b"cublasSetStream_v2").map_err(|e| e.to_string())?;
                let gemm_ex: GemmExFn = *lib.get::<GemmExFn>(b"cublasGemmEx").map_err(|e| e.to_string())?;
                let mut handle = std::ptr::null_mut();
                let s = create(&mut handle);
                if s != 0 {
                    return Err(format!("cublasCreate failed with status {s} ({c})"));
                }
                let s = set_stream(handle, gpu.stream().as_inner().cast());
                if s != 0 {
                    return Err(format!("cublasSetStream failed with status {s}"));
                }
                return Ok(Self { _lib: lib, handle, gemm_ex, path: c });
            }
        }
        Err(format!("cuBLAS not found (set MKERNEL_CUBLAS); tried {}", tried.len()))
    }

    /// Enqueue row-major `C[m, n] = A[m, k] @ B` (B per `layout`), bf16 in and out, f32 compute.
    pub fn gemm(
        &self,
        shape: GemmShape,
        layout: BLayout,
        a: &DeviceBuffer<bf16>,
        b: &DeviceBuffer<bf16>,
        c: &DeviceBuffer<bf16>,
    ) -> Result<(), String> {
        let (m, n, k) = (shape.m as i32, shape.n as i32, shape.k as i32);
        let (alpha, beta) = (1.0f32, 0.0f32);
        // Column-major view: C^T[n, m] = B^T[n, k] @ A^T[k, m].
        let (op_b, ldb) = match layout {
            BLayout::KN => (OP_N, n),
            BLayout::NK => (OP_T, k),
        };
        // SAFETY: the buffers hold at least the sizes the shape implies (checked by the caller's
        // Gemm::new on the same buffers) and stay alive until the stream is synchronised.
        let s = unsafe {
            (self.gemm_ex)(
                self.handle,
                op_b,
                OP_N,
                n,
                m,
                k,
                (&alpha as *const f32).cast(),
                b.addr() as *const c_void,
                CUDA_R_16BF,
                ldb,
                a.addr() as *const c_void,
                CUDA_R_16BF,
                k,
                (&beta as *const f32).cast(),
                c.addr() as *mut c_void,
                CUDA_R_16BF,
                n,
                CUBLAS_COMPUTE_32F,
                CUBLAS_GEMM_DEFAULT,
            )
        };
        if s != 0 {
            return Err(format!("cublasGemmEx failed with status {s}"));
        }
        Ok(())
    }
}
