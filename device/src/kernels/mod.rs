//! The kernels of the PTX module. Each is `#[no_mangle] extern "ptx-kernel"` taking one
//! `#[repr(C)]` parameter block from [`crate::abi`].

/// The two entry points of a kernel built on the GEMM engine, one per B layout: the first runs
/// `$body::<1>` (B `[K, N]` row-major, `TRANS_B = 1`), the second `$body::<0>` (B `[N, K]`). The
/// one place where a layout becomes the engine's `TRANS_B`, and where the engine's launch bounds
/// (384 threads, one CTA per SM) are declared.
macro_rules! b_layout_entry_points {
    ($params:ty => $body:ident; $(#[$kn_doc:meta])* kn: $kn:ident; $(#[$nk_doc:meta])* nk: $nk:ident) => {
        $(#[$kn_doc])*
        ///
        /// # Safety
        /// Launched only by its host op (host/ops/), which sizes the grid (384 threads a CTA) and
        /// the shared memory and makes every address in `p` valid for the launch.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $kn(p: $params) {
            crate::launch_bounds!(384, 1);
            $body::<1>(&p);
        }

        $(#[$nk_doc])*
        ///
        /// # Safety
        /// As the `[K, N]` entry point's.
        #[no_mangle]
        pub unsafe extern "ptx-kernel" fn $nk(p: $params) {
            crate::launch_bounds!(384, 1);
            $body::<0>(&p);
        }
    };
}

// The attention and ring-attention entry points write their launch bounds as literals (512 threads
// at D = 64, 384 at D = 128): keep them what the host launches.
const _: () = assert!(crate::kernels_info::attention::threads(64) == 512);
const _: () = assert!(crate::kernels_info::attention::threads(128) == 384);

pub mod ag_gemm;
pub mod allgather;
pub mod attention;
pub mod gemm;
pub mod gemm_rs;
pub mod gemm_rs_nodes;
pub mod moe;
pub mod reduce;
pub mod reduce_nodes;
pub mod ring_attention;
pub mod selftest;
