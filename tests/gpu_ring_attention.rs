//! Ring attention on GPUs, one process per rank under the launcher (`mkernel rank-check
//! ring-attention`): every rank makes the whole sequence from one fresh seed, runs the ring on its
//! shard (poisoned outputs) and checks every one of its rows against the single-GPU kernel on the
//! whole sequence and sampled rows against an f64 reference, for three rounds of fresh data; then
//! 20 launches back to back cycle through the rounds' inputs, each written on the stream right
//! after the launch before, and each launch's O and lse must be its round's bits. Causal runs use
//! zigzag shards. Layouts: 1 node x 2, 2 emulated nodes x 1 (the
//! K/V and the flags cross through FIFO, proxy and emulated NIC) and, with four GPUs, 1 x 4 and
//! 2 x 2, and 4 emulated nodes x 1 (every hop through the proxy), each also with fewer receive
//! slots than steps (slots reused within a launch) and with tiles walked as one unit over every
//! step (`--split-tiles`); two ranks sharing one GPU where only one exists, and three emulated
//! nodes of one rank on two GPUs.
use mkernel::testing::{gpu_or_skip, gpus_or_skip, rank_check};

fn check(nprocs: u32, nodes: u32, gpus: &[u32], extra: &[&str]) {
    rank_check(env!("CARGO_BIN_EXE_mkernel"), "ring-attention", (nprocs, nodes), gpus, extra);
}

/// Non-causal and causal, D 128 and 64, GQA, BSHD, ragged shards (300 rows: 2 blocks + 44).
fn variants(nprocs: u32, nodes: u32, gpus: &[u32]) {
    check(nprocs, nodes, gpus, &["--config", "2x4x300x128"]);
    check(nprocs, nodes, gpus, &["--config", "2x4x300x128", "--causal"]);
    check(nprocs, nodes, gpus, &["--config", "1x8x258x64", "--heads-kv", "2", "--causal", "--layout", "bshd"]);
    check(nprocs, nodes, gpus, &["--config", "1x2x512x64", "--layout", "bshd"]);
    check(nprocs, nodes, gpus, &["--config", "2x4x300x128", "--causal", "--split-tiles", "0"]);
}

#[test]
fn two_ranks_sharing_one_gpu() {
    if gpu_or_skip("two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    check(2, 1, &[0, 0], &["--config", "1x2x200x128", "--causal"]);
}

#[test]
fn one_node_of_two() {
    if !gpus_or_skip("one_node_of_two", 2) {
        return;
    }
    variants(2, 1, &[0, 1]);
}

#[test]
fn two_emulated_nodes_of_one() {
    if !gpus_or_skip("two_emulated_nodes_of_one", 2) {
        return;
    }
    variants(2, 2, &[0, 1]);
}

#[test]
fn four_ranks_one_node_and_two_emulated_nodes() {
    if !gpus_or_skip("four_ranks_one_node_and_two_emulated_nodes", 4) {
        return;
    }
    variants(4, 1, &[0, 1, 2, 3]);
    variants(4, 2, &[0, 1, 2, 3]);
    // Fewer receive slots than steps after the first: sends wait for the slot to be given back.
    check(4, 1, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--causal", "--slots", "2"]);
    check(4, 1, &[0, 1, 2, 3], &["--config", "1x8x258x64", "--heads-kv", "2", "--slots", "2"]);
    check(4, 2, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--causal", "--slots", "2"]);
    // Tiles as one unit over every step (none split, some split), masks on and off, both head
    // dimensions, one node and two.
    check(4, 1, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--causal", "--split-tiles", "0"]);
    check(4, 1, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--split-tiles", "5"]);
    check(4, 1, &[0, 1, 2, 3], &["--config", "1x8x258x64", "--heads-kv", "2", "--causal", "--split-tiles", "3"]);
    check(4, 2, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--causal", "--split-tiles", "7"]);
    // Reused slots ignore the split (every tile step by step).
    check(4, 1, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--slots", "2", "--split-tiles", "0"]);
}

/// Rings whose every hop crosses nodes: each forwarded slot waits for the next node's word that
/// it landed, which once closed a cycle of waits around the ring.
#[test]
fn every_hop_across_nodes() {
    if !gpus_or_skip("every_hop_across_nodes", 2) {
        return;
    }
    check(3, 3, &[0, 1, 0], &["--config", "1x4x300x128", "--causal"]);
    if gpus_or_skip("every_hop_across_nodes (4 nodes)", 4) {
        variants(4, 4, &[0, 1, 2, 3]);
        check(4, 4, &[0, 1, 2, 3], &["--config", "2x4x300x128", "--slots", "2"]);
    }
}
