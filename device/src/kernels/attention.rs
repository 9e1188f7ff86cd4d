//! Flash-attention forward (one GPU): the attention pieces' persistent CTA, one entry point per
//! head dimension.
use crate::abi::AttnParams;
use crate::arch::{block_idx_x, grid_dim_x};
use crate::attention::{run_cta, CtaSlot, OneStep};
use crate::sched::Role;
use crate::sync::Bound;

#[inline(always)]
unsafe fn attention<const D: u32>(p: &AttnParams) {
    let b = Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: 0, role: Role::Compute as u32 };
    run_cta::<D, _>(p, &OneStep(p), CtaSlot { index: block_idx_x(), ctas: grid_dim_x() }, b);
}

/// Attention forward, head dimension 64.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_attention_d64(p: AttnParams) {
    crate::launch_bounds!(384, 1);
    attention::<64>(&p);
}

/// Attention forward, head dimension 128.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_attention_d128(p: AttnParams) {
    crate::launch_bounds!(384, 1);
    attention::<128>(&p);
}
