//! AllGather + GEMM on GPUs, one process per rank under the launcher (`mkernel rank-check
//! ag-gemm`): fresh random shards that differ per rank, poisoned outputs; the gathered A checked
//! exactly, C bit for bit against the unfused path (our all-gather, then our GEMM) and against an
//! f64 host reference on sampled rows; rounds with new inputs and no barrier between them; 100
//! launches back to back and CUDA-graph replays on inputs that cycle through three verified
//! rounds, each launch's C bit for bit against its round's; the tile walk static, drawn, and static with the
//! push CTAs joining late; the stream-K tail on and off, and the arrival tail (their tiles' C
//! within rounding of the unfused path's, every other tile bit for bit); the compute CTAs copying the shard themselves
//! (`--spread`). Layouts: 1 node x 2, 2 emulated nodes x 1, and with
//! four GPUs 1 x 4 and 2 x 2; ranks sharing one GPU where only one exists.
use mkernel::testing::{gpu_or_skip, gpus_or_skip, run_ranks};

fn check(nprocs: u32, nodes: u32, gpus: &[u32], extra: &[&str]) {
    let mut args = vec!["rank-check", "ag-gemm"];
    args.extend(extra);
    run_ranks(env!("CARGO_BIN_EXE_mkernel"), nprocs, nodes, gpus, &args, 300);
}

#[test]
fn two_ranks_sharing_one_gpu() {
    // Both paths (NVLink-style peer writes through CUDA IPC, and FIFO + proxy + emulated NIC) on
    // a single GPU; the two ranks' kernels time-slice, so keep it small.
    if gpu_or_skip("two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    let small = ["--shape", "512x264x136", "--rounds", "2", "--back-to-back", "10", "--push-ctas", "2"];
    check(2, 1, &[0, 0], &small);
    check(2, 2, &[0, 0], &small);
    // The copy engines' gather (a side stream's copies and one-CTA steps beside the fused
    // launch): a 32 MiB shard, 64 tiles a rank (the two ranks' kernels time-slice the GPU).
    let engines = [
        "--shape",
        "8192x8x4096",
        "--chunk-rows",
        "96",
        "--engines",
        "true",
        "--path",
        "fused",
        "--back-to-back",
        "10",
    ];
    check(2, 1, &[0, 0], &[&engines[..], &["--graph"]].concat());
    check(2, 2, &[0, 0], &[&engines[..], &["--in-place"]].concat());
}

#[test]
fn one_node_two_gpus() {
    if !gpus_or_skip("one_node_two_gpus", 2) {
        return;
    }
    let g = [0, 1];
    // The awkward shape: M/W = 1000 rows, N = 8, K = 72; both B layouts, f32 output.
    check(2, 1, &g, &["--shape", "2000x8x72", "--layout", "kn"]);
    check(2, 1, &g, &["--shape", "2000x8x72", "--layout", "nk", "--f32"]);
    check(2, 1, &g, &["--shape", "2000x1544x1032", "--layout", "nk", "--in-place", "--graph"]);
    check(
        2,
        1,
        &g,
        &["--shape", "2000x1544x1032", "--layout", "kn", "--f32", "--chunk-rows", "48", "--push-ctas", "3"],
    );
    check(2, 1, &g, &["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2", "--graph"]);
    // Pushes fanned out (each piece loaded once for every peer), with ragged chunks.
    check(2, 1, &g, &["--shape", "2000x1544x1032", "--layout", "nk", "--fan", "--chunk-rows", "48"]);
    // A static walk the push CTAs join late (sched::TileIter::joined): at their first wave, at
    // the modelled one, and past the last (no share).
    let joined = ["--join", "true", "--back-to-back", "20"];
    check(2, 1, &g, &[&["--shape", "8192x4096x4096", "--join-wave", "1", "--rounds", "2"][..], &joined].concat());
    check(2, 1, &g, &[&["--shape", "2000x1544x1032", "--layout", "nk", "--graph"][..], &joined].concat());
    check(2, 1, &g, &[&["--shape", "2000x1544x1032", "--join-wave", "1000"][..], &joined].concat());
    // Spread copies (four push CTAs on every other chunk, every sixth compute CTA's spare warps
    // on the rest), here where they are not the default; small units: many per chunk.
    let spread = ["--spread", "true", "--back-to-back", "20"];
    check(
        2,
        1,
        &g,
        &[&["--shape", "2000x8x72", "--layout", "nk", "--f32", "--chunk-rows", "48"][..], &spread].concat(),
    );
    check(
        2,
        1,
        &g,
        &[&["--shape", "8192x4096x4096", "--spread-unit", "4096", "--rounds", "2", "--graph"][..], &spread].concat(),
    );
    check(2, 1, &g, &[&["--shape", "2000x1544x1032", "--in-place", "--graph"][..], &spread].concat());
    // The arrival tail on one node, where the compute tiles write the local rows into the gathered
    // A (no spread at two ranks): the cut rows are the peer's, never this rank's.
    check(2, 1, &g, &["--shape", "2304x1544x1032", "--dynamic", "true", "--tail-rows", "4", "--graph"]);
}

/// The copy engines moving the shard inside the node (`--engines true`): shards in several
/// chunk-aligned pieces with ragged chunks, CUDA graphs (the side stream captured with the fused
/// launch), launches back to back, in place, f32; 1 x 2, and 2 x 1 in place (with several nodes
/// only in place).
#[test]
fn copy_engines_gather() {
    if !gpus_or_skip("copy_engines_gather", 2) {
        return;
    }
    let g = [0, 1];
    // `--path fused`: the back-to-back launches and graph replays run the path the op chose.
    let e = |extra: &[&'static str]| [&["--engines", "true", "--path", "fused"][..], extra].concat();
    check(2, 1, &g, &e(&["--shape", "2000x8x72", "--layout", "nk", "--f32"]));
    check(2, 1, &g, &e(&["--shape", "2000x1544x1032", "--chunk-rows", "48", "--back-to-back", "20", "--graph"]));
    check(2, 1, &g, &e(&["--shape", "32768x1544x4096", "--chunk-rows", "200", "--rounds", "2", "--graph"]));
    check(2, 1, &g, &e(&["--shape", "8192x4096x4096", "--layout", "nk", "--in-place", "--back-to-back", "20"]));
    check(2, 2, &g, &e(&["--shape", "2000x1544x1032", "--in-place", "--graph"]));
    check(2, 2, &g, &e(&["--shape", "8192x2048x4096", "--layout", "nk", "--in-place", "--rounds", "2"]));
}

/// [`copy_engines_gather`] at 1 x 4 (each rank copying to three peers, each starting at the
/// next) and at 2 x 2 in place (beside the forward and inter-send CTAs).
#[test]
fn copy_engines_gather_four_gpus() {
    if !gpus_or_skip("copy_engines_gather_four_gpus", 4) {
        return;
    }
    let g = [0, 1, 2, 3];
    let e = |extra: &[&'static str]| [&["--engines", "true", "--path", "fused"][..], extra].concat();
    check(4, 1, &g, &e(&["--shape", "4000x1544x1032", "--layout", "nk", "--f32", "--graph"]));
    // 128 MiB shards: two pieces to each of three peers.
    check(4, 1, &g, &e(&["--shape", "32768x1032x8192", "--chunk-rows", "200", "--rounds", "2", "--graph"]));
    check(4, 1, &g, &e(&["--shape", "32768x1544x4096", "--chunk-rows", "200", "--back-to-back", "20", "--graph"]));
    check(4, 1, &g, &e(&["--shape", "8192x4096x4096", "--in-place", "--rounds", "2"]));
    check(4, 2, &g, &e(&["--shape", "4000x1544x1032", "--layout", "kn", "--in-place", "--graph"]));
    check(4, 2, &g, &e(&["--shape", "16384x2048x4096", "--layout", "nk", "--in-place", "--back-to-back", "20"]));
}

#[test]
fn two_emulated_nodes_one_gpu_each() {
    if !gpus_or_skip("two_emulated_nodes_one_gpu_each", 2) {
        return;
    }
    let g = [0, 1];
    check(2, 2, &g, &["--shape", "2000x8x72", "--layout", "nk"]);
    check(2, 2, &g, &["--shape", "2000x1544x1032", "--layout", "kn", "--in-place", "--graph"]);
    check(2, 2, &g, &["--shape", "4096x2048x2048", "--layout", "nk", "--f32", "--chunk-rows", "200"]);
    check(2, 2, &g, &["--shape", "2000x1544x1032", "--spread", "true", "--graph"]);
    check(2, 2, &g, &["--shape", "2000x1544x1032", "--spread", "true", "--in-place"]);
    // The arrival tail: the last rows to land cut into k-ranges (3 ways over 17 k-blocks: ranges
    // that cross tiles), launches back to back and through a graph. Shards of whole tile rows: a
    // tile row that also holds this rank's rows sorts last and cannot be cut (a typed error).
    check(2, 2, &g, &["--shape", "4096x2048x2048", "--tail-rows", "3", "--back-to-back", "20", "--graph"]);
    check(2, 2, &g, &["--shape", "2304x1544x1032", "--layout", "nk", "--tail-rows", "2", "--tail-ways", "3", "--f32"]);
}

#[test]
fn four_gpus_one_node_and_two_nodes() {
    if !gpus_or_skip("four_gpus_one_node_and_two_nodes", 4) {
        return;
    }
    let g = [0, 1, 2, 3];
    check(4, 1, &g, &["--shape", "4000x8x72", "--layout", "kn"]);
    check(4, 1, &g, &["--shape", "4000x1544x1032", "--layout", "nk", "--f32", "--graph"]);
    check(4, 1, &g, &["--shape", "8192x4096x4096", "--layout", "kn", "--in-place", "--rounds", "2"]);
    // Push CTAs alone (the spread copies are the default on one node of four).
    check(4, 1, &g, &["--shape", "8192x4096x4096", "--layout", "nk", "--spread", "false", "--graph"]);
    check(4, 2, &g, &["--shape", "4000x8x72", "--layout", "nk"]);
    check(4, 2, &g, &["--shape", "4000x1544x1032", "--layout", "kn", "--in-place", "--graph"]);
    // Pushes fanned out to the three peers at once; several nodes: to the node's other rank.
    check(
        4,
        1,
        &g,
        &["--shape", "4000x1544x1032", "--layout", "kn", "--fan", "--chunk-rows", "48", "--spread", "false"],
    );
    check(4, 1, &g, &["--shape", "8192x4096x4096", "--layout", "nk", "--fan", "--in-place", "--graph"]);
    check(4, 2, &g, &["--shape", "4000x1544x1032", "--layout", "nk", "--fan", "--f32"]);
    // A static walk the push CTAs join late, from the start (wave 0) and at wave 2; drawn tiles
    // on one node.
    let joined = ["--join", "true", "--back-to-back", "20"];
    check(4, 1, &g, &[&["--shape", "4000x1544x1032", "--join-wave", "0", "--f32"][..], &joined].concat());
    check(
        4,
        1,
        &g,
        &[&["--shape", "8192x4096x4096", "--layout", "nk", "--join-wave", "2", "--graph"][..], &joined].concat(),
    );
    check(4, 1, &g, &["--shape", "8192x4096x4096", "--dynamic", "true", "--in-place", "--rounds", "2"]);
    // The stream-K tail (on by default on a static walk: 1024 tiles on 124 compute CTAs leave
    // 32): on a drawn walk too, and off.
    let tail = ["--shape", "8192x4096x4096", "--push-ctas", "8", "--back-to-back", "20", "--graph"];
    check(4, 1, &g, &[&tail[..], &["--dynamic", "true", "--tail-split", "true", "--f32"]].concat());
    check(4, 1, &g, &[&tail[..], &["--tail-split", "false"]].concat());
    check(4, 1, &g, &[&tail[..], &["--layout", "nk", "--rounds", "2"]].concat());
    // The arrival tail at 2 x 2 (two shards arrive from the other node: one over the link, one
    // forwarded) and on one node's drawn walk.
    check(4, 2, &g, &["--shape", "8192x4096x4096", "--layout", "nk", "--tail-rows", "4", "--back-to-back", "20"]);
    check(
        4,
        1,
        &g,
        &["--shape", "4608x1544x1032", "--dynamic", "true", "--tail-rows", "6", "--tail-ways", "2", "--graph"],
    );
    // The compute CTAs' spare warps copying beside the push CTAs: every CTA, small units, push
    // CTAs on every third chunk; across two nodes beside the forward CTAs.
    let spread = ["--spread", "true", "--back-to-back", "20"];
    check(
        4,
        1,
        &g,
        &[&["--shape", "8192x4096x4096", "--rounds", "2", "--graph", "--spread-every", "1"][..], &spread].concat(),
    );
    check(
        4,
        1,
        &g,
        &[&["--shape", "8192x4096x4096", "--spread-push-every", "3", "--spread-unit", "4096"][..], &spread].concat(),
    );
    check(
        4,
        1,
        &g,
        &[&["--shape", "4000x1544x1032", "--layout", "nk", "--f32", "--chunk-rows", "48"][..], &spread].concat(),
    );
    check(
        4,
        1,
        &g,
        &[&["--shape", "8192x4096x4096", "--layout", "nk", "--in-place", "--spread-unit", "8192"][..], &spread]
            .concat(),
    );
    check(4, 2, &g, &[&["--shape", "4000x1544x1032", "--graph"][..], &spread].concat());
}
