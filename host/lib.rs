#![warn(missing_docs)]
#![doc = include_str!("../README.md")]
//!
//! ## Modules
//! - [`gpu`]: the host GPU runtime (context, module, buffers, tensor maps, typed launches).
//! - [`gemm`]: the persistent warp-specialised TMA + wgmma GEMM.
//! - [`attention`]: the flash-attention forward (wgmma, online softmax, TMA pipeline).
//! - [`ops`]: every op (GEMM, all-gather, AllGather + GEMM, ...) with its unfused reference path.
//! - [`comm`]: the communication runtime (world, bootstrap, launcher, communicator, FIFO, proxy,
//!   transports).
//! - [`bench`](mod@bench): the benchmark harness behind `mkernel bench`.
//! - [`abi`]: the parameter blocks shared with the device crate.
//! - [`testing`]: helpers for GPU tests and benches (device or loud skip, random data, errors).
pub mod baseline;
pub mod bench;
pub mod comm;
mod error;
pub mod gpu;
pub mod ops;
pub mod testing;

pub use error::{DiagBuffers, Error, Result, WaitReport, MAX_TIMEOUT, MIN_TIMEOUT};
pub use gpu::{Gpu, GpuError};
pub use mkernel_device::abi;
pub use mkernel_device::{attn_tiles, sched, tile};
pub use ops::attention;
pub use ops::gemm;
