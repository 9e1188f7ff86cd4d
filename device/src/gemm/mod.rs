//! The GEMM framework every tensor-core kernel is built from, in the manner of CUTLASS 3's
//! collective mainloop / collective epilogue / tile scheduler:
//! - [`mainloop`]: the shared-memory layout of the A and B stages, the producer's TMA loads of one
//!   k-block and the consumers' wgmma over it, for tiles 64, 128, 192, 224 or 256 columns wide
//!   (the type of the accumulators, [`Accumulators`]);
//! - [`epilogue`]: what happens to a finished accumulator tile ([`Epilogue`]: store it locally;
//!   fused kernels add their own);
//! - [`engine`]: the persistent warp-specialised loop that joins them through the
//!   [`crate::pipeline`] ring, walking the tiles a [`crate::sched::TileScheduler`] hands it
//!   ([`feed`]: a static walk, or positions claimed from a ticket counter).
//!
//! A kernel is then a few lines: pick a scheduler and an epilogue, give other roles to other CTAs.
pub mod engine;
pub mod epilogue;
pub mod feed;
pub mod mainloop;

pub use crate::kernels_info::gemm::*;
pub use engine::compute_cta;
pub use epilogue::{Epilogue, SplitKStore, StoreC, TailStore};
pub use mainloop::{Acc128, Acc192, Acc224, Acc256, Acc64, Accumulators};
