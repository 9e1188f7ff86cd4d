//! MoE dispatch + grouped GEMM on GPUs, one process per rank under the launcher (`mkernel
//! rank-check moe`): fresh tokens whose values encode their rank and index, fresh routings
//! (uniform, skewed: 80% of tokens to one expert, empty experts, every token on the same experts),
//! poisoned outputs; the layout row by row against the host's, every dispatched row bit for bit
//! against its source, the output bit for bit against the unfused path and within the precision
//! contract of an f64 host reference on sampled rows; ranks holding different token counts, one
//! token; 100 launches back to back; CUDA-graph replays; a bad expert id reported by name.
//! Layouts: 1 node x 2, 2 emulated nodes x 1 (FIFO, proxy, emulated NIC between them) and, with
//! four GPUs, 1 x 4 and 2 x 2; two ranks sharing one GPU where only one exists.
use mkernel::testing::{gpu_or_skip, gpus_or_skip, rank_check};

fn check(nprocs: u32, gpus: &[u32], extra: &[&str]) {
    nodes_check(nprocs, 1, gpus, extra);
}

fn nodes_check(nprocs: u32, nodes: u32, gpus: &[u32], extra: &[&str]) {
    rank_check(env!("CARGO_BIN_EXE_mkernel"), "moe", (nprocs, nodes), gpus, extra);
}

#[test]
fn two_ranks_sharing_one_gpu() {
    if gpu_or_skip("two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    check(2, &[0, 0], &["--config", "200x128x72x4x2", "--rounds", "2", "--back-to-back", "10", "--pull-ctas", "2"]);
}

#[test]
fn two_emulated_nodes_of_one_gpu() {
    // Records, counts, tokens and flags for the other node through FIFO, proxy and emulated NIC.
    if !gpus_or_skip("two_emulated_nodes_of_one_gpu", 2) {
        return;
    }
    nodes_check(2, 2, &[0, 1], &["--config", "300x256x264x8x2", "--graph", "--bad-id"]);
    nodes_check(
        2,
        2,
        &[0, 1],
        &["--config", "700x512x256x12x3", "--routing", "skewed", "--layout", "nk", "--vary", "650"],
    );
}

#[test]
fn two_emulated_nodes_of_two_gpus() {
    if !gpus_or_skip("two_emulated_nodes_of_two_gpus", 4) {
        return;
    }
    let g = [0, 1, 2, 3];
    nodes_check(4, 2, &g, &["--config", "500x256x264x16x4", "--graph"]);
    nodes_check(4, 2, &g, &["--config", "900x1024x512x8x2", "--routing", "empty", "--f32", "--vary", "300"]);
}

#[test]
fn one_node_two_gpus() {
    if !gpus_or_skip("one_node_two_gpus", 2) {
        return;
    }
    let g = [0, 1];
    check(2, &g, &["--config", "300x256x264x8x2", "--bad-id", "--graph"]);
    check(2, &g, &["--config", "1000x512x520x16x4", "--routing", "skewed", "--layout", "nk", "--f32"]);
    check(2, &g, &["--config", "700x264x256x12x3", "--routing", "empty", "--vary", "650", "--chunk-tokens", "16"]);
    check(2, &g, &["--config", "1x128x64x8x2", "--rounds", "2"]);
    check(2, &g, &["--config", "2048x1024x1024x8x2", "--routing", "one", "--layout", "nk", "--rounds", "2"]);
    check(2, &g, &["--config", "2048x7168x512x32x8", "--pull-ctas", "4", "--run-records", "7", "--rounds", "1"]);
}

#[test]
fn four_gpus_one_node() {
    if !gpus_or_skip("four_gpus_one_node", 4) {
        return;
    }
    let g = [0, 1, 2, 3];
    check(4, &g, &["--config", "500x256x264x16x4", "--graph", "--bad-id"]);
    check(4, &g, &["--config", "900x512x256x8x2", "--routing", "skewed", "--layout", "nk", "--vary", "300"]);
    check(4, &g, &["--config", "1024x4096x1024x32x8", "--routing", "empty", "--rounds", "2", "--f32"]);
}
