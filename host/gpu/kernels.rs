//! The kernels of the embedded PTX module, each typed by its parameter block.
use mkernel_device::abi::*;
use std::marker::PhantomData;

/// The PTX module built from `device/` by build.rs.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/mkernel.ptx"));

/// A kernel of the module whose single parameter is a `P`.
pub struct Kernel<P> {
    pub name: &'static str,
    _p: PhantomData<fn(P)>,
}

impl<P> Clone for Kernel<P> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<P> Copy for Kernel<P> {}

impl<P> Kernel<P> {
    const fn new(name: &'static str) -> Self {
        Self { name, _p: PhantomData }
    }
}

pub const AXPY: Kernel<AxpyParams> = Kernel::new("mk_axpy");
pub const TMA_ROUNDTRIP: Kernel<TmaRoundTripParams> = Kernel::new("mk_tma_roundtrip");
pub const WGMMA_TILE: Kernel<WgmmaTileParams> = Kernel::new("mk_wgmma_tile");
pub const FLAG_HANDSHAKE: Kernel<HandshakeParams> = Kernel::new("mk_flag_handshake");
pub const CLUSTER_IDS: Kernel<ClusterIdsParams> = Kernel::new("mk_cluster_ids");
pub const GEMM_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_bf16_kn");
pub const GEMM_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_bf16_nk");
pub const ALLGATHER: Kernel<AllGatherParams> = Kernel::new("mk_allgather");
pub const AG_GEMM_KN: Kernel<AgGemmParams> = Kernel::new("mk_ag_gemm_kn");
pub const AG_GEMM_NK: Kernel<AgGemmParams> = Kernel::new("mk_ag_gemm_nk");
pub const GEMM_RS_KN: Kernel<GemmRsParams> = Kernel::new("mk_gemm_rs_kn");
pub const GEMM_RS_NK: Kernel<GemmRsParams> = Kernel::new("mk_gemm_rs_nk");
pub const REDUCE_PULL: Kernel<ReduceParams> = Kernel::new("mk_reduce_pull");
pub const FIFO_PUSH_TEST: Kernel<FifoTestParams> = Kernel::new("mk_fifo_push_test");

/// Every kernel the host expects in the module (checked when the module loads).
pub const ALL: &[&str] = &[
    AXPY.name,
    TMA_ROUNDTRIP.name,
    WGMMA_TILE.name,
    FLAG_HANDSHAKE.name,
    CLUSTER_IDS.name,
    GEMM_KN.name,
    GEMM_NK.name,
    ALLGATHER.name,
    AG_GEMM_KN.name,
    AG_GEMM_NK.name,
    GEMM_RS_KN.name,
    GEMM_RS_NK.name,
    REDUCE_PULL.name,
    FIFO_PUSH_TEST.name,
];
