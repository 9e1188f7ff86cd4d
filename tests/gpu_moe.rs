//! MoE dispatch + grouped GEMM on GPUs, one process per rank under the launcher (`mkernel
//! rank-check moe`): fresh tokens whose values encode their rank and index, fresh routings
//! (uniform, skewed: 80% of tokens to one expert, empty experts, every token on the same experts),
//! poisoned outputs and layout tables; the layout row by row against the host's, every dispatched row bit for bit
//! against its source, the output bit for bit against the unfused path and within the precision
//! contract of an f64 host reference on sampled rows; ranks holding different token counts, one
//! token; 100 launches back to back and CUDA-graph replays on tokens and routings that cycle
//! through three verified rounds, each launch's output and layout bit for bit against its round's; a bad expert id reported by name.
//! The pull CTAs join the tiles by default; one test runs them without (`--no-join`), one with
//! the copy engines moving the tokens between a node's ranks (`--engines on`), one with the
//! spare warps of the CTAs running tiles moving rows too (`--side-pull=true`).
//! Layouts: 1 node x 2, 2 emulated nodes x 1 (FIFO, proxy, emulated NIC between them) and, with
//! four GPUs, 1 x 4 and 2 x 2; two ranks sharing one GPU where only one exists, as one node and
//! as two emulated nodes (sizes where a fused launch holds every SM). Above 8 ranks
//! (the product's 2 nodes x 8): 16 ranks as 2 emulated nodes x 8 and 12 as 2 x 6, every rank on
//! one GPU (they time-slice it: tiny shapes, few launches, generous but bounded timeouts), and
//! with eight GPUs 1 x 8, 2 x 4 and 2 x 8 (two ranks per GPU).
use mkernel::testing::{gpu_or_skip, gpus_or_skip, rank_check, run_ranks};

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
    // An odd token count at top-k 8 (104-byte records: each source's records start 16-byte
    // aligned only through `MoeParams::records_stride`), shipped in three routers' shares.
    check(2, &[0, 0], &["--config", "201x128x72x16x8", "--rounds", "2", "--back-to-back", "5", "--pull-ctas", "3"]);
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
fn two_emulated_nodes_sharing_one_gpu() {
    // Both ranks on GPU 0, so the emulated NIC's writes between them must not need an SM: at
    // these sizes a fused launch holds every SM, and device-to-device copies (the driver's copy
    // kernel) then waited until a bounded wait gave up (2000 and 4000 tokens a rank timed out).
    if gpu_or_skip("two_emulated_nodes_sharing_one_gpu").is_none() {
        return;
    }
    let g = [0, 0];
    let few = ["--timeout-ms", "20000", "--rounds", "2", "--back-to-back", "5"];
    let mut uniform = vec!["--config", "4000x256x264x16x3", "--pull-ctas", "12", "--graph"];
    uniform.extend(few);
    nodes_check(2, 2, &g, &uniform);
    let mut skewed = vec!["--config", "2000x512x264x16x3", "--routing", "skewed", "--layout", "nk", "--f32"];
    skewed.extend(["--vary", "1500"]);
    skewed.extend(few);
    nodes_check(2, 2, &g, &skewed);
}

/// `(ranks, nodes, args)` cases on GPU 0 (ranks sharing it), each with `option`, two rounds and
/// 10 launches back to back.
fn on_gpu_zero(option: &str, cases: &[(u32, u32, &[&str])]) {
    for &(ranks, nodes, extra) in cases {
        let mut args = vec![option, "--rounds", "2", "--back-to-back", "10"];
        args.extend(extra);
        nodes_check(ranks, nodes, &vec![0; ranks as usize], &args);
    }
}

#[test]
fn own_tokens_gathered() {
    // MoeOptions::gather: own tokens read where they are by the grouped GEMM's producer; one
    // rank, two ranks on one GPU, two emulated nodes on one GPU; both layouts, skewed, empty
    // and one-token routings, top-k 8; the tiles drawn with the pull CTAs joining (the
    // default) and walked statically (`--no-join`).
    if gpu_or_skip("own_tokens_gathered").is_none() {
        return;
    }
    on_gpu_zero(
        "--gather",
        &[
            (1, 1, &["--config", "2000x512x264x16x3", "--graph"]),
            (1, 1, &["--config", "900x256x136x8x2", "--routing", "skewed", "--layout", "nk", "--f32"]),
            (1, 1, &["--config", "1100x256x264x32x8", "--routing", "empty", "--no-join"]),
            (1, 1, &["--config", "1x200x136x8x4", "--pull-ctas", "2"]),
            (2, 1, &["--config", "700x256x264x16x3", "--pull-ctas", "4"]),
            (2, 1, &["--config", "201x128x72x16x8", "--routing", "last", "--pull-ctas", "3", "--no-join"]),
            (2, 2, &["--config", "1500x256x264x16x3", "--layout", "nk", "--vary", "700"]),
        ],
    );
}

#[test]
fn spare_warps_move_rows() {
    // MoeOptions::side_pull: the producer warpgroup's spare warps of every CTA running tiles
    // take pull items beside them; one rank (skewed, empty experts, [N, K], f32, no helpers, no
    // join, top-k 8), two ranks on one GPU, two emulated nodes on one GPU.
    if gpu_or_skip("spare_warps_move_rows").is_none() {
        return;
    }
    on_gpu_zero(
        "--side-pull=true",
        &[
            (1, 1, &["--config", "2000x512x264x16x3", "--graph"]),
            (1, 1, &["--config", "900x256x136x8x2", "--routing", "skewed", "--layout", "nk", "--f32", "--no-helpers"]),
            (1, 1, &["--config", "1100x256x264x32x8", "--routing", "empty", "--no-join"]),
            // 25 vectors a row: the copy loop stays warp-uniform where lanes have no vector.
            (1, 1, &["--config", "600x200x136x8x4", "--pull-ctas", "2"]),
            (2, 1, &["--config", "700x256x264x16x3", "--pull-ctas", "4"]),
            (2, 1, &["--config", "201x128x72x16x8", "--routing", "last", "--pull-ctas", "3"]),
            (2, 2, &["--config", "1500x256x264x16x3", "--layout", "nk", "--vary", "700"]),
        ],
    );
}

#[test]
fn spare_warps_across_gpus() {
    // MoeOptions::side_pull with peers' rows over NVLink (and with the copy engines), 1 x 2 and,
    // with four GPUs, 1 x 4 and 2 emulated nodes x 2.
    if !gpus_or_skip("spare_warps_across_gpus", 2) {
        return;
    }
    let side = |ranks: u32, nodes: u32, extra: &[&str]| {
        let mut args = vec!["--side-pull=true"];
        args.extend(extra);
        nodes_check(ranks, nodes, &(0..ranks).collect::<Vec<_>>(), &args);
    };
    side(2, 1, &["--config", "1000x512x520x16x4", "--routing", "skewed", "--layout", "nk", "--graph"]);
    side(2, 1, &["--config", "2048x7168x512x32x8", "--pull-ctas", "4", "--engines", "on", "--rounds", "2"]);
    if gpus_or_skip("spare_warps_across_gpus (four GPUs)", 4) {
        side(4, 1, &["--config", "2048x7168x512x32x8", "--pull-ctas", "4", "--vary", "1500"]);
        side(4, 2, &["--config", "900x1024x512x8x2", "--routing", "empty", "--f32"]);
    }
}

#[test]
fn pull_ctas_that_end_with_the_pull() {
    // MoeOptions::join off: the compute CTAs walk their static shares of the tiles and the pull
    // CTAs end with the pull (the default has them draw tiles with the compute CTAs).
    if gpu_or_skip("pull_ctas_that_end_with_the_pull").is_none() {
        return;
    }
    on_gpu_zero(
        "--no-join",
        &[
            (1, 1, &["--config", "2000x512x264x16x3", "--graph"]),
            (2, 1, &["--config", "700x256x264x16x3", "--routing", "skewed", "--layout", "nk"]),
            (2, 2, &["--config", "1500x256x264x16x3", "--pull-ctas", "4", "--vary", "700"]),
        ],
    );
}

#[test]
fn copy_engines() {
    // MoeOptions::engines: the copy engines put each rank's tokens into its node peers' rx and
    // the pull CTAs read them there (the 0/1 handshake on MOE_ENGINES, launches back to back,
    // graphs), own runs first by default (one case without; one without the engines). Ranks sharing GPU 0 where one GPU exists (their copies are then the driver's
    // copy kernel, which needs a free SM: small grids only); 1 x 2 and 1 x 4 on two and four.
    if gpu_or_skip("copy_engines").is_none() {
        return;
    }
    let on = ["--engines", "on"];
    let case = |ranks: u32, g: &[u32], extra: &[&str]| check(ranks, g, &[&on[..], extra].concat());
    on_gpu_zero(
        "--engines=on",
        &[
            (2, 1, &["--config", "200x128x72x4x2", "--pull-ctas", "2", "--graph"]),
            // Rank 1 holds no tokens: nothing to copy, but its flag still lands (and is reset).
            (2, 1, &["--config", "300x256x136x8x2", "--routing", "skewed", "--layout", "nk", "--f32", "--vary", "300"]),
            (2, 1, &["--config", "700x256x264x16x3", "--pull-ctas", "4", "--gather"]),
            (2, 1, &["--config", "700x256x264x16x3", "--pull-ctas", "3", "--no-join", "--routing", "empty"]),
            (4, 1, &["--config", "300x256x136x16x4", "--pull-ctas", "2", "--vary", "90"]),
            (2, 1, &["--config", "500x256x264x16x4", "--own-first", "off", "--pull-ctas", "3"]),
        ],
    );
    // Own runs first without the engines (the item order alone), one node and two emulated.
    on_gpu_zero(
        "--own-first=on",
        &[
            (2, 1, &["--config", "500x256x264x16x4", "--pull-ctas", "3", "--routing", "skewed"]),
            (4, 1, &["--config", "300x256x136x16x4", "--pull-ctas", "2", "--vary", "90"]),
            (2, 2, &["--config", "1500x256x264x16x3", "--pull-ctas", "4", "--vary", "700"]),
        ],
    );
    let layouts: &[(u32, &[u32])] = &[(2, &[0, 1]), (4, &[0, 1, 2, 3])];
    for &(w, g) in layouts {
        if !gpus_or_skip(&format!("copy_engines ({w} GPUs)"), w) {
            break;
        }
        case(w, g, &["--config", "300x256x264x8x2", "--bad-id", "--graph"]);
        case(
            w,
            g,
            &["--config", "1000x512x520x16x4", "--routing", "skewed", "--layout", "nk", "--f32", "--vary", "330"],
        );
        case(w, g, &["--config", "1x128x64x8x2", "--rounds", "2"]);
        case(
            w,
            g,
            &["--config", "2048x7168x512x32x8", "--pull-ctas", "4", "--run-records", "7", "--back-to-back", "20"],
        );
        case(w, g, &["--config", "4096x7168x2048x256x8", "--rounds", "1", "--back-to-back", "20"]);
    }
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

/// Bound on one multi-rank run of the wide tests: up to 16 processes time-slice one GPU.
const WIDE_TIMEOUT_S: u64 = 600;

/// `rank-check moe COMMON EXTRA` as `nprocs` ranks forming `nodes` nodes on `gpus`, device waits
/// and bootstrap steps bounded by 60 s (ranks sharing a GPU wait for each other's time slices).
fn wide_check(nprocs: u32, nodes: u32, gpus: &[u32], common: &[&str], extra: &[&str]) {
    let mut args = vec!["rank-check", "moe", "--timeout-ms", "60000"];
    args.extend(common);
    args.extend(extra);
    run_ranks(env!("CARGO_BIN_EXE_mkernel"), nprocs, nodes, gpus, &args, WIDE_TIMEOUT_S);
}

/// Few launches, two pull CTAs: what 12 or 16 ranks time-slicing one GPU can afford.
const SHARED: [&str; 6] = ["--pull-ctas", "2", "--rounds", "2", "--back-to-back", "10"];

#[test]
fn sixteen_ranks_two_nodes_sharing_one_gpu() {
    // 2 emulated nodes x 8 ranks, all on GPU 0: every rank sends to ranks 8..15 (and across the
    // emulated NIC); ranks hold 31, 29, ..., 1 tokens (T = 1 on rank 15); then skewed (80% to
    // expert 0), [E/W, I, H] weights, f32 output, ranks holding 40 down to 1 (rank 13) and 0.
    if gpu_or_skip("sixteen_ranks_two_nodes_sharing_one_gpu").is_none() {
        return;
    }
    let g = [0; 16];
    wide_check(16, 2, &g, &SHARED, &["--config", "31x128x64x32x4", "--vary", "2", "--graph", "--bad-id"]);
    let skewed = ["--config", "40x256x136x48x3", "--routing", "skewed", "--layout", "nk", "--f32", "--vary", "3"];
    wide_check(16, 2, &g, &SHARED, &skewed);
}

#[test]
fn sixteen_ranks_two_nodes_wide_routings_sharing_one_gpu() {
    // 16 ranks (2 x 8) on GPU 0: empty experts (two of each rank's three get no token); every
    // token on the last 16 experts (ranks 12..15, four destinations of four experts each, the
    // lowest one in a varying slot), ranks holding 16 down to 1; uniform top-16 of 64 (up to 16
    // destinations per token).
    if gpu_or_skip("sixteen_ranks_two_nodes_wide_routings_sharing_one_gpu").is_none() {
        return;
    }
    let g = [0; 16];
    let few = ["--pull-ctas", "2", "--rounds", "1", "--back-to-back", "5"];
    wide_check(16, 2, &g, &few, &["--config", "24x128x64x48x3", "--routing", "empty"]);
    wide_check(16, 2, &g, &few, &["--config", "16x128x64x64x16", "--routing", "last", "--vary", "1"]);
    wide_check(16, 2, &g, &few, &["--config", "20x128x72x64x16", "--layout", "nk", "--vary", "1"]);
}

#[test]
fn twelve_ranks_two_nodes_sharing_one_gpu() {
    // 2 emulated nodes x 6 on GPU 0 (no power of two), ranks holding 30 down to 8 tokens.
    if gpu_or_skip("twelve_ranks_two_nodes_sharing_one_gpu").is_none() {
        return;
    }
    wide_check(12, 2, &[0; 12], &SHARED, &["--config", "30x128x64x24x4", "--vary", "2"]);
}

#[test]
fn eight_gpus_one_node() {
    if !gpus_or_skip("eight_gpus_one_node", 8) {
        return;
    }
    let g: Vec<u32> = (0..8).collect();
    check(8, &g, &["--config", "500x256x264x32x4", "--graph", "--bad-id"]);
    check(8, &g, &["--config", "900x512x256x16x2", "--routing", "skewed", "--layout", "nk", "--vary", "120"]);
    check(8, &g, &["--config", "1024x4096x1024x64x8", "--routing", "empty", "--rounds", "2", "--f32"]);
}

#[test]
fn eight_gpus_two_emulated_nodes() {
    if !gpus_or_skip("eight_gpus_two_emulated_nodes", 8) {
        return;
    }
    let g: Vec<u32> = (0..8).collect();
    nodes_check(8, 2, &g, &["--config", "500x256x264x32x4", "--graph"]);
    nodes_check(8, 2, &g, &["--config", "900x1024x512x16x2", "--routing", "skewed", "--f32", "--vary", "128"]);
}

#[test]
fn sixteen_ranks_on_eight_gpus_two_nodes() {
    // The product's 2 x 8 layout, each GPU holding one rank of each emulated node.
    if !gpus_or_skip("sixteen_ranks_on_eight_gpus_two_nodes", 8) {
        return;
    }
    let g: Vec<u32> = (0..16).map(|r| r % 8).collect();
    let common = ["--pull-ctas", "4", "--rounds", "2", "--back-to-back", "20"];
    wide_check(16, 2, &g, &common, &["--config", "300x256x264x32x4", "--graph", "--vary", "19"]);
    let skewed = ["--config", "512x1024x512x64x8", "--routing", "skewed", "--layout", "nk", "--f32"];
    wide_check(16, 2, &g, &common, &skewed);
    wide_check(16, 2, &g, &common, &["--config", "256x512x256x64x16", "--routing", "last"]);
}
