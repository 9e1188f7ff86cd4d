//! Every struct the host and the device both see: kernel parameter blocks (passed by value as the
//! kernel's single parameter) and records in shared buffers. `#[repr(C)]`, `Pod`, and a size
//! assert each, so a layout change is a compile error on both sides at once.
use bytemuck::{Pod, Zeroable};

macro_rules! abi_struct {
    ($(#[$m:meta])* pub struct $name:ident [$size:literal] { $($(#[$fm:meta])* pub $f:ident : $t:ty,)* }) => {
        $(#[$m])*
        #[repr(C)]
        #[derive(Clone, Copy, Debug, Default, PartialEq, Pod, Zeroable)]
        pub struct $name { $($(#[$fm])* pub $f: $t,)* }
        const _: () = assert!(core::mem::size_of::<$name>() == $size);
    };
}

/// B is `[K, N]` row-major (N-major: wgmma reads it transposed).
pub const B_KN: u32 = 0;
/// B is `[N, K]` row-major (K-major: the layout of a torch `Linear` weight).
pub const B_NK: u32 = 1;

abi_struct! {
    /// `y = a * x + y` over `n` f32 (the elementwise self-test).
    pub struct AxpyParams [32] {
        pub x: u64,
        pub y: u64,
        pub n: u64,
        pub a: f32,
        pub _pad: u32,
    }
}

abi_struct! {
    /// TMA round trip: box at (`c0`, `c1`) of `src_map` -> shared memory -> same box of `dst_map`;
    /// the raw shared-memory bytes (swizzled) are also copied to `raw_out`.
    pub struct TmaRoundTripParams [40] {
        pub src_map: u64,
        pub dst_map: u64,
        pub raw_out: u64,
        pub c0: i32,
        pub c1: i32,
        pub box_bytes: u32,
        /// 1: also store the box back through `dst_map`; 0: load only.
        pub store: u32,
    }
}

abi_struct! {
    /// One warpgroup tile product `out[64, n] (f32) = A[64, 64] @ B`, B per `b_layout`.
    pub struct WgmmaTileParams [32] {
        pub a_map: u64,
        pub b_map: u64,
        pub out: u64,
        pub n: u32,
        pub b_layout: u32,
    }
}

abi_struct! {
    /// GPU <-> host flag handshake through host-mapped memory (system-scope acquire/release).
    pub struct HandshakeParams [56] {
        pub host_data: u64,
        pub host_flags: u64,
        pub out: u64,
        pub diag: u64,
        pub timeout_ns: u64,
        pub iters: u32,
        pub words: u32,
        pub base_epoch: u32,
        pub seed: u32,
    }
}

abi_struct! {
    /// Each block writes its cluster coordinates to `out[blockIdx.x]`.
    pub struct ClusterIdsParams [8] {
        pub out: u64,
    }
}

/// `WaitDiag::status`: nothing timed out.
pub const DIAG_OK: u32 = 0;
/// `WaitDiag::status`: a waiter is writing its record.
pub const DIAG_CLAIMED: u32 = 1;
/// `WaitDiag::status`: the record is complete.
pub const DIAG_TIMED_OUT: u32 = 2;

/// `WaitDiag::what`: a flag in memory (peer, host or device) did not reach the expected epoch.
pub const WAIT_FLAG: u32 = 1;
/// `WaitDiag::what`: an mbarrier's "full" phase (data loaded) never completed.
pub const WAIT_MBAR_FULL: u32 = 2;
/// `WaitDiag::what`: an mbarrier's "empty" phase (slot released) never completed.
pub const WAIT_MBAR_EMPTY: u32 = 3;

abi_struct! {
    /// Who waited for what: written (once, by the first waiter that times out) into a buffer the
    /// host can read even after the kernel stopped. Any non-zero `status` also tells every other
    /// bounded wait of the launch to give up, so the kernel ends instead of hanging.
    pub struct WaitDiag [56] {
        pub status: u32,
        pub rank: u32,
        pub role: u32,
        pub cta: u32,
        pub tile: u32,
        pub what: u32,
        pub flag_addr: u64,
        pub expected: u64,
        pub seen: u64,
        pub waited_ns: u64,
    }
}

abi_struct! {
    /// How a persistent kernel's CTAs split into roles: CTAs `0..compute` compute, the next
    /// `intra_comm` copy over NVLink, then `inter_send` feed the proxy FIFO, then `inter_reduce`.
    pub struct RoleSplit [16] {
        pub compute: u32,
        pub intra_comm: u32,
        pub inter_send: u32,
        pub inter_reduce: u32,
    }
}

abi_struct! {
    /// The persistent GEMM: `C[m, n] = A[m, k] @ B`, bf16 in, f32 accumulate, bf16 (TMA store
    /// through `c_map`) or f32 (`c_f32`) out.
    pub struct GemmParams [88] {
        pub a_map: u64,
        pub b_map: u64,
        pub c_map: u64,
        pub c_f32: u64,
        pub diag: u64,
        pub timeout_ns: u64,
        pub m: u32,
        pub n: u32,
        pub k: u32,
        pub b_layout: u32,
        pub out_f32: u32,
        pub group_m: u32,
        pub roles: RoleSplit,
    }
}
