//! Block- and cluster-wide barriers.
//!
//! Always the non-`.aligned` forms (`barrier.sync`, not `bar.sync`, which means
//! `barrier.sync.aligned`): LLVM may duplicate an inline-asm barrier into both arms of a branch
//! (it did: `if tid == 0 { .. } sync_threads()` became two barriers), and an `.aligned` barrier
//! reached by one warp at two different instructions deadlocks. Rust cannot mark asm convergent.
use core::arch::asm;

/// `__syncthreads()`: barrier 0 over the whole block, orders shared and global memory.
#[inline(always)]
pub fn sync_threads() {
    unsafe { asm!("barrier.sync 0;", options(nostack)) }
}

/// [`sync_threads`] that also tells every thread whether any thread passed `pred = true`
/// (`barrier.red.or`): one thread's verdict reaches the whole block at the barrier.
#[inline(always)]
pub fn sync_threads_or(pred: bool) -> bool {
    let out: u32;
    unsafe {
        asm!(
            "{{ .reg .pred q, r;",
            "setp.ne.u32 q, {p}, 0;",
            "barrier.red.or.pred r, 0, q;",
            "selp.u32 {o}, 1, 0, r; }}",
            p = in(reg32) pred as u32,
            o = out(reg32) out,
            options(nostack)
        )
    }
    out != 0
}

/// Named barrier `id` (1..16) over `count` threads (a multiple of 32): every participating warp
/// must call it with the same `count`.
#[inline(always)]
pub fn named_barrier_sync(id: u32, count: u32) {
    unsafe { asm!("barrier.sync {id}, {n};", id = in(reg32) id, n = in(reg32) count, options(nostack)) }
}

/// Arrive on named barrier `id` without waiting (producer side of a producer/consumer barrier).
#[inline(always)]
pub fn named_barrier_arrive(id: u32, count: u32) {
    unsafe { asm!("barrier.arrive {id}, {n};", id = in(reg32) id, n = in(reg32) count, options(nostack)) }
}

/// Cluster-wide barrier: arrive (release) then wait (acquire). Every thread of every CTA in the
/// cluster must call it.
#[inline(always)]
pub fn cluster_sync() {
    unsafe { asm!("barrier.cluster.arrive.release;", "barrier.cluster.wait.acquire;", options(nostack)) }
}
