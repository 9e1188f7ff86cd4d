//! The kernels of the embedded PTX module, each typed by its parameter block.
use mkernel_device::abi::*;
use std::marker::PhantomData;

/// The PTX module built from `device/` by build.rs.
pub const PTX: &str = include_str!(concat!(env!("OUT_DIR"), "/mkernel.ptx"));

/// [`PTX`] assembled for sm_90a by build.rs with NVIDIA's `ptxas`, or empty where the build had
/// none (the module is then JIT-compiled from [`PTX`] when a device opens).
pub const CUBIN: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/mkernel.cubin"));

/// The assembler of [`CUBIN`] (its path and `--version` line), empty without one.
pub const CUBIN_PTXAS: &str = include_str!(concat!(env!("OUT_DIR"), "/mkernel.ptxas"));

/// A kernel of the module whose single parameter is a `P`.
pub struct Kernel<P> {
    /// The kernel's symbol in the PTX module (`#[no_mangle]` on the device side).
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

/// Self-test: `y[i] = a * x[i] + y[i]`, grid-stride.
pub const AXPY: Kernel<AxpyParams> = Kernel::new("mk_axpy");
/// Self-test: trap at once (a device fault on purpose).
pub const TRAP: Kernel<AxpyParams> = Kernel::new("mk_trap");
/// Self-test: one CTA TMA-loads a box into swizzled shared memory, dumps the raw shared bytes and
/// TMA-stores the box back out.
pub const TMA_ROUNDTRIP: Kernel<TmaRoundTripParams> = Kernel::new("mk_tma_roundtrip");
/// Self-test: one warpgroup computes `out[64, n] = A[64, 64] @ B[64, n]` with TMA and wgmma, B
/// laid out as the GEMM engine lays it.
pub const WGMMA_TILE: Kernel<WgmmaTileParams> = Kernel::new("mk_wgmma_tile");
/// Self-test: GPU <-> host ping-pong over host-mapped flags and data.
pub const FLAG_HANDSHAKE: Kernel<HandshakeParams> = Kernel::new("mk_flag_handshake");
/// The stream-wait probe: one thread raises a word on a timetable while every SM is held
/// (see [`crate::bench::stream_wait()`]).
pub const PROBE_RAISE: Kernel<ProbeRaiseParams> = Kernel::new("mk_probe_raise");
/// Self-test: every block writes its cluster rank, cluster size and cluster id.
pub const CLUSTER_IDS: Kernel<ClusterIdsParams> = Kernel::new("mk_cluster_ids");
/// The persistent GEMM, B `[K, N]` row-major (launched by [`crate::ops::gemm::Gemm`]).
pub const GEMM_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_bf16_kn");
/// The persistent GEMM, B `[N, K]` row-major (a torch `Linear` weight).
pub const GEMM_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_bf16_nk");
/// The memory-bound GEMM (few rows: the deep ring, no staging tiles), B `[K, N]` row-major
/// (launched by [`crate::ops::gemm::Gemm`] per [`crate::ops::gemm::default_deep_ring`]).
pub const GEMM_DEEP_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_kn");
/// The memory-bound GEMM, B `[N, K]` row-major.
pub const GEMM_DEEP_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_nk");
/// The GEMM in 224-column tiles (deep ring), B `[K, N]` row-major (launched by
/// [`crate::ops::gemm::Gemm`] per [`crate::ops::gemm::default_tile_n`]).
pub const GEMM_DEEP_N224_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n224_kn");
/// The GEMM in 224-column tiles, B `[N, K]` row-major.
pub const GEMM_DEEP_N224_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n224_nk");
/// The GEMM in 192-column tiles, B `[K, N]` row-major.
pub const GEMM_DEEP_N192_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n192_kn");
/// The GEMM in 192-column tiles, B `[N, K]` row-major.
pub const GEMM_DEEP_N192_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n192_nk");
/// The memory-bound GEMM in 128-column tiles, B `[K, N]` row-major.
pub const GEMM_DEEP_N128_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n128_kn");
/// The memory-bound GEMM in 128-column tiles, B `[N, K]` row-major.
pub const GEMM_DEEP_N128_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n128_nk");
/// The memory-bound GEMM in 64-column tiles, B `[K, N]` row-major.
pub const GEMM_DEEP_N64_KN: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n64_kn");
/// The memory-bound GEMM in 64-column tiles, B `[N, K]` row-major.
pub const GEMM_DEEP_N64_NK: Kernel<GemmParams> = Kernel::new("mk_gemm_deep_n64_nk");
/// The gathered GEMM `C[i] = A[rows[i]] @ B`, B `[K, N]` row-major (launched by
/// [`crate::ops::gemm::GatherGemm`]).
pub const GEMM_GATHER_KN: Kernel<GatherGemmParams> = Kernel::new("mk_gemm_gather_kn");
/// The gathered GEMM, B `[N, K]` row-major.
pub const GEMM_GATHER_NK: Kernel<GatherGemmParams> = Kernel::new("mk_gemm_gather_nk");
/// The split-K GEMM (few output tiles), B `[K, N]` row-major (launched by
/// [`crate::ops::gemm::Gemm`] when its split is 2 or more).
pub const GEMM_SPLITK_KN: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_kn");
/// The split-K GEMM, B `[N, K]` row-major.
pub const GEMM_SPLITK_NK: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_nk");
/// The split-K GEMM in 224-column tiles, B `[K, N]` row-major.
pub const GEMM_SPLITK_N224_KN: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n224_kn");
/// The split-K GEMM in 224-column tiles, B `[N, K]` row-major.
pub const GEMM_SPLITK_N224_NK: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n224_nk");
/// The split-K GEMM in 192-column tiles, B `[K, N]` row-major.
pub const GEMM_SPLITK_N192_KN: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n192_kn");
/// The split-K GEMM in 192-column tiles, B `[N, K]` row-major.
pub const GEMM_SPLITK_N192_NK: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n192_nk");
/// The split-K GEMM in 128-column tiles, B `[K, N]` row-major.
pub const GEMM_SPLITK_N128_KN: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n128_kn");
/// The split-K GEMM in 128-column tiles, B `[N, K]` row-major.
pub const GEMM_SPLITK_N128_NK: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n128_nk");
/// The split-K GEMM in 64-column tiles, B `[K, N]` row-major.
pub const GEMM_SPLITK_N64_KN: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n64_kn");
/// The split-K GEMM in 64-column tiles, B `[N, K]` row-major.
pub const GEMM_SPLITK_N64_NK: Kernel<SplitKParams> = Kernel::new("mk_gemm_splitk_n64_nk");
/// The stream-K GEMM (fewer tiles than SMs, too many to split evenly), B `[K, N]` row-major
/// (launched by [`crate::ops::gemm::Gemm`]).
pub const GEMM_STREAMK_KN: Kernel<SplitKParams> = Kernel::new("mk_gemm_streamk_kn");
/// The stream-K GEMM, B `[N, K]` row-major.
pub const GEMM_STREAMK_NK: Kernel<SplitKParams> = Kernel::new("mk_gemm_streamk_nk");
/// The GPU-driven all-gather (launched by [`crate::ops::allgather::AllGather`], alone or as the
/// first half of AllGather + GEMM's unfused path).
pub const ALLGATHER: Kernel<AllGatherParams> = Kernel::new("mk_allgather");
/// Fused AllGather + GEMM, B `[K, N]` row-major (launched by [`crate::ops::ag_gemm::AgGemm`]).
pub const AG_GEMM_KN: Kernel<AgGemmParams> = Kernel::new("mk_ag_gemm_kn");
/// Fused AllGather + GEMM, B `[N, K]` row-major.
pub const AG_GEMM_NK: Kernel<AgGemmParams> = Kernel::new("mk_ag_gemm_nk");
/// A step of fused AllGather + GEMM's copy-engine gather (one CTA on the op's side stream).
pub const AG_GEMM_ENGINE: Kernel<AgEngineParams> = Kernel::new("mk_ag_gemm_engine");
/// Fused GEMM + ReduceScatter / AllReduce, B `[K/W, N]` row-major (launched by
/// [`crate::ops::gemm_rs::GemmRs`]).
pub const GEMM_RS_KN: Kernel<GemmRsParams> = Kernel::new("mk_gemm_rs_kn");
/// Fused GEMM + ReduceScatter / AllReduce, B `[N, K/W]` row-major.
pub const GEMM_RS_NK: Kernel<GemmRsParams> = Kernel::new("mk_gemm_rs_nk");
/// Fused GEMM + AllReduce in one shot (every rank sums every tile), one node, B `[K/W, N]`
/// row-major.
pub const GEMM_AR_ONE_SHOT_KN: Kernel<GemmRsParams> = Kernel::new("mk_gemm_ar_one_shot_kn");
/// Fused GEMM + AllReduce in one shot, one node, B `[N, K/W]` row-major.
pub const GEMM_AR_ONE_SHOT_NK: Kernel<GemmRsParams> = Kernel::new("mk_gemm_ar_one_shot_nk");
/// Fused GEMM + ReduceScatter / AllReduce over several nodes (node partials through the FIFO
/// and proxy, inter-send and inter-reduce CTAs), B `[K/W, N]` row-major.
pub const GEMM_RS_NODES_KN: Kernel<GemmRsParams> = Kernel::new("mk_gemm_rs_nodes_kn");
/// Fused GEMM + ReduceScatter / AllReduce over several nodes, B `[N, K/W]` row-major.
pub const GEMM_RS_NODES_NK: Kernel<GemmRsParams> = Kernel::new("mk_gemm_rs_nodes_nk");
/// The second half of GEMM + ReduceScatter / AllReduce's unfused path: pulls every rank's bf16
/// partial over NVLink and sums them in fp32, in the fused kernel's order (same bits).
pub const REDUCE_PULL: Kernel<ReduceParams> = Kernel::new("mk_reduce_pull");
/// The second half of the unfused path over several nodes: node partials over NVLink, one FIFO
/// WRITE per node partial another node needs, then the sum over nodes, in the fused kernel's
/// order (same bits).
pub const REDUCE_NODES: Kernel<ReduceNodesParams> = Kernel::new("mk_reduce_nodes");
/// MoE dispatch + grouped GEMM, experts' weights `[E/W, H, I]` (launched by
/// [`crate::ops::moe::MoeDispatchGemm`]).
pub const MOE_KN: Kernel<MoeParams> = Kernel::new("mk_moe_kn");
/// MoE dispatch + grouped GEMM, experts' weights `[E/W, I, H]`.
pub const MOE_NK: Kernel<MoeParams> = Kernel::new("mk_moe_nk");
/// MoE dispatch + grouped GEMM reading this rank's own tokens where they are (`MOE_GATHER`),
/// experts' weights `[E/W, H, I]`.
pub const MOE_GATHER_KN: Kernel<MoeParams> = Kernel::new("mk_moe_gather_kn");
/// The same with weights `[E/W, I, H]`.
pub const MOE_GATHER_NK: Kernel<MoeParams> = Kernel::new("mk_moe_gather_nk");
/// Flash-attention forward, head dimension 64 (launched by [`crate::ops::attention::Attention`]).
pub const ATTENTION_D64: Kernel<AttnParams> = Kernel::new("mk_attention_d64");
/// Flash-attention forward, head dimension 128.
pub const ATTENTION_D128: Kernel<AttnParams> = Kernel::new("mk_attention_d128");
/// Ring attention, head dimension 64 (launched by
/// [`crate::ops::ring_attention::RingAttention`]).
pub const RING_ATTENTION_D64: Kernel<RingAttnParams> = Kernel::new("mk_ring_attention_d64");
/// Ring attention, head dimension 128.
pub const RING_ATTENTION_D128: Kernel<RingAttnParams> = Kernel::new("mk_ring_attention_d128");
/// FIFO exercise: every thread pushes commands (throughput), or thread 0 ping-pongs with the
/// proxy (round trips); see [`crate::bench::fifo_throughput`] and
/// [`crate::bench::fifo_roundtrips`].
pub const FIFO_PUSH_TEST: Kernel<FifoTestParams> = Kernel::new("mk_fifo_push_test");

/// Every kernel the host expects in the module (checked when the module loads).
pub const ALL: &[&str] = &[
    AXPY.name,
    TRAP.name,
    TMA_ROUNDTRIP.name,
    WGMMA_TILE.name,
    FLAG_HANDSHAKE.name,
    PROBE_RAISE.name,
    CLUSTER_IDS.name,
    GEMM_KN.name,
    GEMM_NK.name,
    GEMM_DEEP_KN.name,
    GEMM_DEEP_NK.name,
    GEMM_DEEP_N224_KN.name,
    GEMM_DEEP_N224_NK.name,
    GEMM_DEEP_N192_KN.name,
    GEMM_DEEP_N192_NK.name,
    GEMM_DEEP_N128_KN.name,
    GEMM_DEEP_N128_NK.name,
    GEMM_DEEP_N64_KN.name,
    GEMM_DEEP_N64_NK.name,
    GEMM_SPLITK_KN.name,
    GEMM_SPLITK_NK.name,
    GEMM_SPLITK_N224_KN.name,
    GEMM_SPLITK_N224_NK.name,
    GEMM_SPLITK_N192_KN.name,
    GEMM_SPLITK_N192_NK.name,
    GEMM_SPLITK_N128_KN.name,
    GEMM_SPLITK_N128_NK.name,
    GEMM_SPLITK_N64_KN.name,
    GEMM_SPLITK_N64_NK.name,
    GEMM_STREAMK_KN.name,
    GEMM_STREAMK_NK.name,
    GEMM_GATHER_KN.name,
    GEMM_GATHER_NK.name,
    ALLGATHER.name,
    AG_GEMM_KN.name,
    AG_GEMM_NK.name,
    AG_GEMM_ENGINE.name,
    GEMM_RS_KN.name,
    GEMM_RS_NK.name,
    GEMM_AR_ONE_SHOT_KN.name,
    GEMM_AR_ONE_SHOT_NK.name,
    GEMM_RS_NODES_KN.name,
    GEMM_RS_NODES_NK.name,
    REDUCE_PULL.name,
    REDUCE_NODES.name,
    MOE_KN.name,
    MOE_NK.name,
    MOE_GATHER_KN.name,
    MOE_GATHER_NK.name,
    ATTENTION_D64.name,
    ATTENTION_D128.name,
    RING_ATTENTION_D64.name,
    RING_ATTENTION_D128.name,
    FIFO_PUSH_TEST.name,
];
