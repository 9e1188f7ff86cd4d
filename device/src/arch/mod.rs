//! The device "std": one tiny `#[inline(always)]` function per PTX instruction, named for what it
//! does. `unsafe` marks a real precondition, written down in a `# Safety` section.
//!
//! Scopes follow PTX: `cta` (the block), `gpu` (the device), `sys` (device + host + peers).

mod barrier;
mod ids;
mod math;
mod mbarrier;
mod memory;
mod regs;
mod smem;
mod time;
mod tma;
mod warp;
pub mod wgmma;

pub use barrier::*;
pub use ids::*;
pub use math::*;
pub use mbarrier::*;
pub use memory::*;
pub use regs::*;
pub use smem::*;
pub use time::*;
pub use tma::*;
pub use warp::*;

/// Abort the whole grid (`trap`): the host sees `CUDA_ERROR_ILLEGAL_INSTRUCTION` / launch failure.
#[inline(always)]
pub fn trap() -> ! {
    unsafe { core::arch::asm!("trap;", options(noreturn, nostack)) }
}
