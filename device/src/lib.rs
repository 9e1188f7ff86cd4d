//! mkernel's device crate.
//!
//! Built twice: for `nvptx64-nvidia-cuda` (sm_90a PTX, through rustc's own NVPTX backend; see the
//! README for why not Rust-CUDA's `cuda_builder`) and for the host as an rlib, so that every struct
//! both sides see (`abi`) and all pure integer logic (`sched`, `tile`) has exactly one definition.
#![no_std]
#![cfg_attr(
    target_arch = "nvptx64",
    feature(abi_ptx, asm_experimental_arch)
)]

pub mod abi;
pub mod sched;
pub mod tile;

#[cfg(target_arch = "nvptx64")]
pub mod arch;
#[cfg(target_arch = "nvptx64")]
pub mod kernels;
#[cfg(target_arch = "nvptx64")]
pub mod sync;

#[cfg(target_arch = "nvptx64")]
#[panic_handler]
fn panic(_: &core::panic::PanicInfo) -> ! {
    // Kernels are written so that nothing panics (no bounds-checked indexing on hot paths);
    // if something does, stop the grid loudly instead of spinning.
    arch::trap()
}
