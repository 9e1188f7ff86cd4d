//! GEMM + ReduceScatter and GEMM + AllReduce on GPUs, one process per rank under the launcher
//! (`mkernel rank-check gemm-rs|gemm-ar`): fresh random inputs that differ per rank, poisoned
//! outputs; the fused result bit for bit against the unfused path (our GEMM, then a pull-and-sum
//! kernel) and within the precision contract of an f64 host reference on sampled rows; rounds
//! with new inputs and no barrier; 100 launches back to back and CUDA-graph replays on inputs that
//! cycle through three verified rounds, each launch's output bit for bit against its round's; the tile walk's
//! lead at its extremes; the all-reduce in both forms (one shot and two phases); partials pushed
//! by their sources and pulled by their owners, with and without the send tiles prefetching the
//! own tiles' partials. Layouts: 1 node x 2 and, with four GPUs, 1 x 4; ranks sharing one GPU
//! where only one exists. Several nodes (emulated: FIFO, proxy and emulated NIC between groups
//! of ranks of this host): 2 x 1, 2 x 2 and 3 x 1 with every rank on GPU 0 (their kernels
//! time-slice, so shapes stay small), 2 x 1 on two GPUs, 2 x 2 and 4 x 1 on four.
use mkernel::testing::{gpu_or_skip, gpus_or_skip, rank_check};

fn check(op: &str, nprocs: u32, gpus: &[u32], extra: &[&str]) {
    rank_check(env!("CARGO_BIN_EXE_mkernel"), op, (nprocs, 1), gpus, extra);
}

/// `rank-check OP` as `nprocs` ranks forming `nodes` emulated nodes on `gpus`.
fn check_nodes(op: &str, nprocs: u32, nodes: u32, gpus: &[u32], extra: &[&str]) {
    rank_check(env!("CARGO_BIN_EXE_mkernel"), op, (nprocs, nodes), gpus, extra);
}

#[test]
fn two_ranks_sharing_one_gpu() {
    if gpu_or_skip("two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    let small = ["--shape", "512x264x128", "--rounds", "2", "--back-to-back", "10"];
    check("gemm-rs", 2, &[0, 0], &small);
    // The all-reduce in both forms (one shot is the default at this size).
    check("gemm-ar", 2, &[0, 0], &small);
    check("gemm-ar", 2, &[0, 0], &[&small[..], &["--one-shot", "off"]].concat());
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
        // The two-phase walk's extremes: own tiles right behind the sends, and everything sent
        // first (this all-reduce would run one shot by default, where no lead applies).
        let two_phase = ["--shape", "2000x1544x1024", "--one-shot", "off"];
        check(op, 2, &g, &[&two_phase[..], &["--lead", "0", "--back-to-back", "20"]].concat());
        check(op, 2, &g, &[&two_phase[..], &["--lead", "100000"]].concat());
    }
    // The all-reduce's other form at each of those sizes: small partials run one shot by
    // default, large ones in two phases.
    let ar = |extra: &[&str]| check("gemm-ar", 2, &g, extra);
    ar(&["--shape", "2000x8x144", "--layout", "kn", "--one-shot", "off"]);
    ar(&["--shape", "2000x8x144", "--layout", "nk", "--f32", "--one-shot", "off"]);
    ar(&["--shape", "2000x1544x2048", "--layout", "nk", "--graph", "--one-shot", "off"]);
    ar(&["--shape", "8192x4096x4096", "--layout", "nk", "--rounds", "2", "--one-shot", "on"]);
    ar(&["--shape", "8192x4096x4096", "--layout", "kn", "--f32", "--one-shot", "on", "--graph"]);
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
        check(op, 4, &g, &["--shape", "4000x1544x1024", "--lead", "1", "--one-shot", "off"]);
    }
    // The first sends staggered (on by default from 8 waves of tiles; this shape has 7).
    check("gemm-rs", 4, &g, &["--shape", "8192x4096x4096", "--stagger-ns", "3000", "--rounds", "2"]);
    let ar = |extra: &[&str]| check("gemm-ar", 4, &g, extra);
    // The all-reduce's two phases staggered: asked, and by default from 8 waves (15 here).
    ar(&["--shape", "8192x4096x4096", "--stagger-ns", "3000", "--one-shot", "off"]);
    ar(&["--shape", "16384x4096x8192", "--one-shot", "off", "--back-to-back", "20"]);
    // Four sources: one shot sums in the owner-first order on every rank (the same bits as the
    // unfused path everywhere).
    ar(&["--shape", "4000x8x288", "--layout", "kn", "--one-shot", "off"]);
    ar(&["--shape", "4000x1544x2048", "--layout", "nk", "--f32", "--one-shot", "off"]);
    ar(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2", "--one-shot", "on"]);
}

#[test]
fn two_emulated_nodes_sharing_one_gpu() {
    // 2 nodes x 1 rank, both on GPU 0: node partials cross through the FIFO, the proxy and the
    // emulated NIC; nothing but the ranks' own GPU. The awkward shape (M = W x 1000,
    // N = 8, K/W = 72) with the full 100 launches back to back, then both B layouts, f32
    // output, ragged groups of tiles, edge tiles, a CUDA graph.
    if gpu_or_skip("two_emulated_nodes_sharing_one_gpu").is_none() {
        return;
    }
    let g = [0, 0];
    for op in ["gemm-rs", "gemm-ar"] {
        check_nodes(op, 2, 2, &g, &["--shape", "2000x8x144", "--layout", "kn", "--rounds", "2"]);
        let nk = ["--shape", "2000x8x144", "--layout", "nk", "--f32", "--group", "1", "--back-to-back", "10"];
        check_nodes(op, 2, 2, &g, &nk);
        let ragged = ["--shape", "1040x600x256", "--group", "4", "--inter-reduce", "2", "--back-to-back", "10"];
        check_nodes(op, 2, 2, &g, &ragged);
        let graph = ["--shape", "512x264x128", "--layout", "nk", "--rounds", "1", "--back-to-back", "5", "--graph"];
        check_nodes(op, 2, 2, &g, &graph);
    }
}

#[test]
fn two_nodes_of_two_ranks_sharing_one_gpu() {
    // 2 nodes x 2 ranks on GPU 0: the NVLink protocol inside each node gathers every block's
    // partials at its collector, node partials go between the collectors.
    if gpu_or_skip("two_nodes_of_two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    let g = [0, 0, 0, 0];
    for op in ["gemm-rs", "gemm-ar"] {
        check_nodes(op, 4, 2, &g, &["--shape", "4000x8x288", "--layout", "kn", "--rounds", "2"]);
        let nk = ["--shape", "4000x8x288", "--layout", "nk", "--f32", "--group", "1", "--back-to-back", "10"];
        check_nodes(op, 4, 2, &g, &nk);
        let ragged = ["--shape", "2080x600x512", "--group", "3", "--inter-send", "2", "--back-to-back", "10"];
        check_nodes(op, 4, 2, &g, &ragged);
        // The walk's lead at its extremes (sched::NodeTiles): a collected tile in the same round
        // as its sends, one round after, and every send of each half first.
        for lead in ["0", "1", "all"] {
            check_nodes(op, 4, 2, &g, &["--shape", "2080x600x512", "--lead", lead, "--back-to-back", "5"]);
        }
    }
}

#[test]
fn three_emulated_nodes_sharing_one_gpu() {
    // 3 nodes x 1 rank on GPU 0: several other nodes per block (the all-reduce sends each node
    // partial to two nodes).
    if gpu_or_skip("three_emulated_nodes_sharing_one_gpu").is_none() {
        return;
    }
    let g = [0, 0, 0];
    for op in ["gemm-rs", "gemm-ar"] {
        check_nodes(op, 3, 3, &g, &["--shape", "3000x8x216", "--rounds", "2", "--back-to-back", "10"]);
        check_nodes(
            op,
            3,
            3,
            &g,
            &["--shape", "1560x600x384", "--layout", "nk", "--group", "2", "--back-to-back", "10"],
        );
    }
}

#[test]
fn two_emulated_nodes_two_gpus() {
    if !gpus_or_skip("two_emulated_nodes_two_gpus", 2) {
        return;
    }
    let g = [0, 1];
    for op in ["gemm-rs", "gemm-ar"] {
        check_nodes(op, 2, 2, &g, &["--shape", "2000x8x144", "--layout", "kn"]);
        check_nodes(op, 2, 2, &g, &["--shape", "2000x8x144", "--layout", "nk", "--f32"]);
        check_nodes(op, 2, 2, &g, &["--shape", "2000x1544x2048", "--layout", "nk", "--group", "3", "--graph"]);
        check_nodes(op, 2, 2, &g, &["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2"]);
    }
}

#[test]
fn four_gpus_as_two_and_four_nodes() {
    if !gpus_or_skip("four_gpus_as_two_and_four_nodes", 4) {
        return;
    }
    let g = [0, 1, 2, 3];
    for op in ["gemm-rs", "gemm-ar"] {
        check_nodes(op, 4, 2, &g, &["--shape", "4000x8x288", "--layout", "kn"]);
        check_nodes(op, 4, 2, &g, &["--shape", "4000x8x288", "--layout", "nk", "--f32"]);
        check_nodes(op, 4, 2, &g, &["--shape", "4000x1544x2048", "--layout", "nk", "--group", "2", "--graph"]);
        check_nodes(op, 4, 2, &g, &["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2"]);
        check_nodes(op, 4, 4, &g, &["--shape", "4000x1544x1024", "--layout", "kn", "--back-to-back", "20"]);
        // The walk's lead at its extremes and in between (sched::NodeTiles; 56 tiles a block).
        for lead in ["0", "1", "9", "all"] {
            let walk = ["--shape", "4000x1544x2048", "--lead", lead, "--back-to-back", "10"];
            check_nodes(op, 4, 2, &g, &walk);
        }
        check_nodes(op, 4, 4, &g, &["--shape", "4000x1544x1024", "--layout", "nk", "--lead", "1", "--graph"]);
    }
}

/// `each(world, GPUs, the awkward shape there: M = W x 1000, N = 8, K/W = 72)` at 1 x 2
/// and, with four GPUs, 1 x 4; where only one GPU exists, `shared()` instead (ranks sharing it).
/// `name` names the test in its skip lines.
fn one_node_layouts(name: &str, shared: impl FnOnce(), mut each: impl FnMut(u32, &[u32], &str)) {
    if gpu_or_skip(name).is_none() {
        return;
    }
    if !gpus_or_skip(&format!("{name} (two GPUs)"), 2) {
        return shared();
    }
    let layouts: &[(u32, &[u32])] = &[(2, &[0, 1]), (4, &[0, 1, 2, 3])];
    for &(w, g) in layouts {
        if w == 4 && !gpus_or_skip(&format!("{name} (four GPUs)"), 4) {
            continue;
        }
        each(w, g, &format!("{}x8x{}", 1000 * w, 72 * w));
    }
}

/// Sources pushing their partials into the owners' inboxes (`--push on`) instead of the owners
/// pulling them (the default at two ranks): 1 x 2, and 1 x 4 with four GPUs, the reduce-scatter
/// and the all-reduce's two phases; two ranks sharing one GPU where only one exists.
#[test]
fn pushed_partials() {
    let shared = || check("gemm-rs", 2, &[0, 0], &["--shape", "512x264x128", "--rounds", "2", "--push", "on"]);
    one_node_layouts("pushed_partials", shared, |w, g, awkward| {
        let rs = |extra: &[&str]| check("gemm-rs", w, g, &[extra, &["--push", "on"]].concat());
        rs(&["--shape", awkward, "--layout", "kn"]);
        rs(&["--shape", awkward, "--layout", "nk", "--f32"]);
        rs(&["--shape", "4000x1544x2048", "--layout", "nk", "--graph"]);
        rs(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2"]);
        rs(&["--shape", "4000x1544x1024", "--lead", "0", "--back-to-back", "20"]);
        rs(&["--shape", "4000x1544x1024", "--lead", "all"]);
        let ar = |extra: &[&str]| check("gemm-ar", w, g, &[extra, &["--push", "on", "--one-shot", "off"]].concat());
        ar(&["--shape", awkward, "--layout", "kn"]);
        ar(&["--shape", "4000x1544x2048", "--layout", "nk", "--f32", "--graph"]);
        ar(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2", "--back-to-back", "20"]);
    });
}

/// The copy engines moving the partials and the all-reduce's reduced blocks (`--engines on`),
/// both collectives: the awkward shape in both layouts (partial bands and boxes), f32
/// output, a CUDA graph, rounds with new inputs, launches back to back, bands of one tile row
/// and own tiles right behind their band's sends (the least lead `ops::gemm_rs::engine_lead`
/// allows), CTAs with several tiles, a shape the tuned table has (its lead is not taken), the
/// all-reduce's pushed tail of bands (none, one by default, all). 1 x 2, and 1 x 4 with four
/// GPUs; two and four ranks sharing one GPU where only one exists.
#[test]
fn copy_engines() {
    let on = ["--engines", "on", "--one-shot", "off"];
    let shared = || {
        for op in ["gemm-rs", "gemm-ar"] {
            let c = |ranks: u32, extra: &[&str]| check(op, ranks, &vec![0; ranks as usize], &[&on[..], extra].concat());
            let small = ["--shape", "512x264x128", "--rounds", "2", "--back-to-back", "10"];
            c(2, &small);
            c(4, &[&small[..], &["--group-m", "1"]].concat());
            // Eight bands of one tile row; three of three, the last one short, own tiles right
            // behind their band (lead 9: a band's tiles).
            c(2, &["--shape", "2048x528x256", "--group-m", "1", "--graph", "--layout", "nk"]);
            c(2, &["--shape", "2048x528x256", "--group-m", "3", "--f32", "--lead", "9"]);
            // 256 tiles on 132 CTAs: CTAs with several tiles, sends and own tiles mixed.
            c(2, &["--shape", "8192x1024x256", "--group-m", "2", "--lead", "8", "--back-to-back", "10"]);
        }
        // The all-reduce's last bands pushed by the helpers: none, and all three.
        for tail in ["0", "3"] {
            let shape = ["--shape", "2048x528x256", "--group-m", "3", "--engine-tail", tail, "--back-to-back", "10"];
            check("gemm-ar", 2, &[0, 0], &[&on[..], &shape].concat());
        }
    };
    one_node_layouts("copy_engines", shared, |w, g, awkward| {
        for op in ["gemm-rs", "gemm-ar"] {
            let c = |extra: &[&str]| check(op, w, g, &[&on[..], extra].concat());
            c(&["--shape", awkward, "--layout", "kn"]);
            c(&["--shape", awkward, "--layout", "nk", "--f32"]);
            c(&["--shape", "4000x1544x2048", "--layout", "nk", "--graph"]);
            c(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2", "--back-to-back", "20"]);
            c(&["--shape", "4000x1544x1024", "--f32", "--group-m", "1", "--lead", "7", "--back-to-back", "20"]);
            c(&["--shape", "16384x8192x8192", "--rounds", "1"]);
        }
    });
}

/// Owners pulling the all-reduce's partials (`--push off`), and the own tiles' partials
/// prefetched by the send tiles (`--prefetch on`) for both collectives: 1 x 2, and 1 x 4 with
/// four GPUs; two ranks sharing one GPU where only one exists. The walk's other extreme too: an
/// own tile right behind its round's sends (lead 0) waits for prefetches of the same round.
#[test]
fn pulled_and_prefetched() {
    // Two phases (the all-reduce runs one shot by default at the smaller sizes).
    let pre = ["--one-shot", "off", "--push", "off", "--prefetch", "on"];
    let shared = || {
        for op in ["gemm-rs", "gemm-ar"] {
            let small = ["--shape", "512x264x128", "--rounds", "2", "--back-to-back", "10"];
            check(op, 2, &[0, 0], &[&pre[..], &small].concat());
        }
    };
    one_node_layouts("pulled_and_prefetched", shared, |w, g, awkward| {
        for op in ["gemm-rs", "gemm-ar"] {
            let c = |extra: &[&str]| check(op, w, g, &[&pre[..], extra].concat());
            c(&["--shape", awkward, "--layout", "kn"]);
            c(&["--shape", awkward, "--layout", "nk", "--f32"]);
            c(&["--shape", "4000x1544x2048", "--layout", "nk", "--graph"]);
            c(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2", "--back-to-back", "20"]);
            c(&["--shape", "4000x1544x1024", "--lead", "0", "--back-to-back", "20"]);
        }
        // The all-reduce pulling without prefetches.
        let pull = ["--one-shot", "off", "--push", "off", "--prefetch", "off"];
        let ar = |extra: &[&str]| check("gemm-ar", w, g, &[&pull[..], extra].concat());
        ar(&["--shape", awkward, "--layout", "nk", "--f32"]);
        ar(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2"]);
    });
}

/// The two-phase all-reduce with ranks pulling each other's reduced tiles (`--pull-reduced`):
/// prefetched, pulled and pushed partials, the awkward shape in both layouts (partial
/// edge boxes, a last half tile below the rows), a CUDA graph, launches back to back, lead 0.
/// 1 x 2, and 1 x 4 with four GPUs.
#[test]
fn reduced_tiles_pulled() {
    let two = ["--one-shot", "off", "--pull-reduced", "on"];
    let shared = || check("gemm-ar", 2, &[0, 0], &[&two[..], &["--shape", "512x264x128", "--rounds", "2"]].concat());
    one_node_layouts("reduced_tiles_pulled", shared, |w, g, awkward| {
        let c = |extra: &[&str]| check("gemm-ar", w, g, &[&two[..], extra].concat());
        c(&["--shape", awkward, "--layout", "kn"]);
        c(&["--shape", awkward, "--layout", "nk", "--push", "on"]);
        c(&["--shape", awkward, "--layout", "kn", "--push", "off", "--prefetch", "off"]);
        c(&["--shape", "4000x1544x2048", "--layout", "nk", "--graph"]);
        c(&["--shape", "8192x4096x4096", "--layout", "kn", "--rounds", "2", "--back-to-back", "20"]);
        c(&["--shape", "4000x1544x1024", "--lead", "0", "--back-to-back", "20"]);
        // The default: on at two ranks from 32 MiB of partial and K/W = 4096, off above two
        // ranks (the logs' "pull reduced true / false").
        check("gemm-ar", w, g, &["--one-shot", "off", "--shape", "4096x4096x8192", "--rounds", "2"]);
    });
}

/// f32 output with each compute CTA summing several own tiles in a row (every send first, short
/// k-loops), in the three one-node forms: the helper loads the next own tile's staged partial
/// into the staging tile right after `staged`, so the consumers must all have read the last one
/// (a race a review found in f367066, closed by d48c39c). 1 x 2, and 1 x 4 with four GPUs.
#[test]
fn f32_own_tiles_in_a_row() {
    let shared = || check("gemm-rs", 2, &[0, 0], &["--shape", "1024x1024x256", "--f32", "--lead", "all"]);
    one_node_layouts("f32_own_tiles_in_a_row", shared, |w, g, _| {
        let run = ["--shape", "8192x4096x1024", "--f32", "--lead", "all", "--rounds", "2", "--back-to-back", "20"];
        for form in
            [&["--push", "off", "--prefetch", "on"][..], &["--push", "on"], &["--push", "off", "--prefetch", "off"]]
        {
            check("gemm-rs", w, g, &[&run[..], form].concat());
        }
    });
}
