//! Thread, block, cluster and SM identifiers (PTX special registers).
use core::arch::asm;

macro_rules! sreg_u32 {
    ($(#[$m:meta])* $name:ident, $reg:literal) => {
        $(#[$m])*
        #[inline(always)]
        pub fn $name() -> u32 {
            let r: u32;
            unsafe { asm!(concat!("mov.u32 {r}, ", $reg, ";"), r = out(reg32) r, options(pure, nomem, nostack)) };
            r
        }
    };
}

sreg_u32!(/// `threadIdx.x`
    thread_idx_x, "%tid.x");
sreg_u32!(/// `blockIdx.x`
    block_idx_x, "%ctaid.x");
sreg_u32!(/// `blockIdx.y`
    block_idx_y, "%ctaid.y");
sreg_u32!(/// `blockDim.x`
    block_dim_x, "%ntid.x");
sreg_u32!(/// `gridDim.x`
    grid_dim_x, "%nctaid.x");
sreg_u32!(/// Lane inside the warp (0..32).
    lane_id, "%laneid");
sreg_u32!(/// This CTA's rank inside its cluster.
    cluster_ctarank, "%cluster_ctarank");
sreg_u32!(/// Number of CTAs in this cluster.
    cluster_nctarank, "%cluster_nctarank");
sreg_u32!(/// Cluster index along x in the grid of clusters.
    cluster_id_x, "%clusterid.x");
sreg_u32!(/// Number of clusters along x.
    cluster_nclusters_x, "%nclusterid.x");
sreg_u32!(/// The SM this thread runs on (diagnostics only: not stable across launches).
    sm_id, "%smid");

/// `blockIdx.x`, read where it is called: not merged with other reads of it, so a rare path
/// (a timeout report) does not keep a register holding it from the kernel's start (the fused
/// GEMM's consumers have none to spare; ptxas does not rematerialise special registers).
#[inline(always)]
pub fn block_idx_x_here() -> u32 {
    let r: u32;
    unsafe { asm!("mov.u32 {r}, %ctaid.x;", r = out(reg32) r, options(nomem, nostack)) };
    r
}

/// Warp index inside the block (`threadIdx.x / 32`).
#[inline(always)]
pub fn warp_id() -> u32 {
    thread_idx_x() / 32
}

/// Warpgroup index inside the block (4 consecutive warps, `threadIdx.x / 128`).
#[inline(always)]
pub fn warpgroup_id() -> u32 {
    thread_idx_x() / 128
}
