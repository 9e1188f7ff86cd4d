//! The kernels of the PTX module. Each is `#[no_mangle] extern "ptx-kernel"` taking one
//! `#[repr(C)]` parameter block from [`crate::abi`].
pub mod ag_gemm;
pub mod allgather;
pub mod gemm;
pub mod gemm_rs;
pub mod reduce;
pub mod selftest;
