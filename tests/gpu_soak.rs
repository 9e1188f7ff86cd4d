//! The soak (`mkernel rank-check soak`): 10,000 back-to-back launches each of the GEMM, attention,
//! the all-gather, AllGather + GEMM and ring attention on every rank (two ranks on two GPUs where
//! there are two, else one), with no drift in time per launch (last batch against the fastest), no
//! leak of device memory or file descriptors, and bitwise the same output at the end.
use mkernel::testing::{gpu_or_skip, rank_check};

#[test]
fn ten_thousand_launches_of_each_op() {
    if gpu_or_skip("ten_thousand_launches_of_each_op").is_none() {
        return;
    }
    let gpus = mkernel::gpu::device_count().unwrap_or(1).min(2);
    let list: Vec<u32> = (0..gpus).collect();
    rank_check(env!("CARGO_BIN_EXE_mkernel"), "soak", (gpus, 1), &list, &["--launches", "10000"]);
}
