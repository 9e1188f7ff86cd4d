//! Flash-attention forward (one GPU): the attention pieces' persistent CTA, one entry point per
//! head dimension.
use crate::abi::AttnParams;
use crate::arch::{grid_dim_x, thread_idx_x};
use crate::attention::{run_cta, OneStep};
use crate::comm::signal::launch_epoch;
use crate::sched::Role;
use crate::sync::Bound;

#[inline(always)]
unsafe fn attention<const D: u32>(p: &AttnParams) {
    let b = Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: 0, role: Role::Compute as u32 };
    // Only the producer (thread 0) claims work, so only it needs the epoch.
    let epoch = if thread_idx_x() == 0 { launch_epoch(p.sched as *mut u64, grid_dim_x()) } else { 0 };
    run_cta::<D, _>(p, &OneStep { p, epoch }, grid_dim_x(), b);
}

/// Attention forward, head dimension 64.
///
/// # Safety
/// Launched only by its host op (host/ops/), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_attention_d64(p: AttnParams) {
    crate::launch_bounds!(512, 1);
    attention::<64>(&p);
}

/// Attention forward, head dimension 128.
///
/// # Safety
/// Launched only by its host op (host/ops/), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_attention_d128(p: AttnParams) {
    crate::launch_bounds!(384, 1);
    attention::<128>(&p);
}
