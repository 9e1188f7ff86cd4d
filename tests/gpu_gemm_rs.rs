//! GEMM + ReduceScatter and GEMM + AllReduce on GPUs, one process per rank under the launcher
//! (`mkernel rank-check gemm-rs|gemm-ar`): fresh random inputs that differ per rank, poisoned
//! outputs; the fused result bit for bit against the unfused path (our GEMM, then a pull-and-sum
//! kernel) and within the precision contract of an f64 host reference on sampled rows; rounds
//! with new inputs and no barrier; 100 launches back to back; CUDA-graph replays; the tile walk's
//! lead at its extremes. Layouts: 1 node x 2 and, with four GPUs, 1 x 4; ranks sharing one GPU
//! where only one exists.
use mkernel::testing::{gpu_or_skip, gpus_or_skip, rank_check};

fn check(op: &str, nprocs: u32, gpus: &[u32], extra: &[&str]) {
    rank_check(env!("CARGO_BIN_EXE_mkernel"), op, (nprocs, 1), gpus, extra);
}

#[test]
fn two_ranks_sharing_one_gpu() {
    if gpu_or_skip("two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    let small = ["--shape", "512x264x128", "--rounds", "2", "--back-to-back", "10"];
    check("gemm-rs", 2, &[0, 0], &small);
    check("gemm-ar", 2, &[0, 0], &small);
}

#[test]
fn one_node_two_gpus() {
    if !gpus_or_skip("one_node_two_gpus", 2) {
        return;
    }
    let g = [0, 1];
    for op in ["gemm-rs", "gemm-ar"] {
        // The awkward shape: M = W x 1000, N = 8, K/W = 72; both B layouts, f32 output.
        check(op, 2, &g, &["--shape", "2000x8x144", "--layout", "kn"]);
        check(op, 2, &g, &["--shape", "2000x8x144", "--layout", "nk", "--f32"]);
        check(op, 2, &g, &["--shape", "2000x1544x2048", "--layout", "nk", "--graph"]);
        check(op, 2, &g, &["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2"]);
        // The walk's extremes: own tiles right behind the sends, and everything sent first.
        check(op, 2, &g, &["--shape", "2000x1544x1024", "--lead", "0", "--back-to-back", "20"]);
        check(op, 2, &g, &["--shape", "2000x1544x1024", "--lead", "100000"]);
    }
}

#[test]
fn four_gpus_one_node() {
    if !gpus_or_skip("four_gpus_one_node", 4) {
        return;
    }
    let g = [0, 1, 2, 3];
    for op in ["gemm-rs", "gemm-ar"] {
        check(op, 4, &g, &["--shape", "4000x8x288", "--layout", "kn"]);
        check(op, 4, &g, &["--shape", "4000x1544x2048", "--layout", "nk", "--f32", "--graph"]);
        check(op, 4, &g, &["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2"]);
        check(op, 4, &g, &["--shape", "4000x1544x1024", "--lead", "1"]);
    }
}
