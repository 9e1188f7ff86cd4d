//! The unfused reference of GEMM + ReduceScatter / AllReduce (see [`ReduceParams`]): after each
//! rank's plain GEMM wrote its bf16 partial, every rank pulls the rows it owns (or all rows)
//! from every rank's partial over NVLink and sums them in fp32, the owner's partial first and
//! then the others in rank order, the order the fused kernel uses, so both give the same bits.
//! One node (the ranks' partials are mapped here through CUDA IPC).
use crate::abi::*;
use crate::arch::*;
use crate::comm::signal::{launch_epoch, signal};
use crate::sched::{div_nz, rem_nz, Role};
use crate::sync::Bound;

/// Rows `row0 .. row0 + rows` of the sum over ranks, 8 columns per thread and step.
///
/// # Safety
/// Launched only by its host op (host/ops/), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_reduce_pull(p: ReduceParams) {
    let tid = thread_idx_x();
    let ctas = grid_dim_x();
    let b = Bound { timeout_ns: p.timeout_ns, diag: &p.diag, rank: p.rank, role: Role::InterReduce as u32 };
    if tid == 0 {
        let epoch = launch_epoch(p.launches as *mut u64, ctas);
        if block_idx_x() == 0 {
            // My partial is complete (my GEMM ran before on this stream): tell the others.
            for r in 0..p.world {
                if r != p.rank {
                    signal((pick(&p.peer_flags, r) as *mut u32).add((p.rank * FLAG_STRIDE) as usize), epoch);
                }
            }
        }
        for r in 0..p.world {
            if r != p.rank && b.flag((p.flags as *const u32).add((r * FLAG_STRIDE) as usize), epoch, r).is_err() {
                break;
            }
        }
    }
    sync_threads();
    // The owner of a row is the rank whose block holds it (all-reduce sums every block).
    let rows_per_owner = p.rows_per_owner;
    let vecs = p.n / 8;
    let total = p.rows * vecs;
    let mut i = block_idx_x() * block_dim_x() + tid;
    while i < total {
        let (r, v) = (div_nz(i, vecs), rem_nz(i, vecs));
        let row = p.row0 + r;
        let owner = div_nz(row, rows_per_owner);
        let off = (row * p.n + 8 * v) as usize;
        let mut sum = [0f32; 8];
        let mut add = |s: u32| {
            let w = ld_global_v4_u32((pick(&p.partials, s) as *const u16).add(off) as *const [u32; 4]);
            for j in 0..4 {
                let (lo, hi) = unpack_bf16x2(w[j]);
                sum[2 * j] += lo;
                sum[2 * j + 1] += hi;
            }
        };
        // The owner's partial first, then the others in rank order: the fused kernel's order.
        add(owner);
        for s in 0..p.world {
            if s != owner {
                add(s);
            }
        }
        let out_off = (r * p.n + 8 * v) as usize;
        if p.out_f32 != 0 {
            let out = (p.out as *mut f32).add(out_off) as *mut [u32; 4];
            st_global_v4_u32(out, [sum[0].to_bits(), sum[1].to_bits(), sum[2].to_bits(), sum[3].to_bits()]);
            st_global_v4_u32(out.add(1), [sum[4].to_bits(), sum[5].to_bits(), sum[6].to_bits(), sum[7].to_bits()]);
        } else {
            let w = [
                pack_bf16x2(sum[0], sum[1]),
                pack_bf16x2(sum[2], sum[3]),
                pack_bf16x2(sum[4], sum[5]),
                pack_bf16x2(sum[6], sum[7]),
            ];
            st_global_v4_u32((p.out as *mut u16).add(out_off) as *mut [u32; 4], w);
        }
        i += ctas * block_dim_x();
    }
}
