//! The communication runtime on GPUs: the FIFO fed by thousands of GPU threads, GPU <-> proxy
//! round trips, and the GPU-driven all-gather across processes in several layouts (payloads
//! encode their source rank and launch; odd shard sizes; checked launches with new data and no
//! barrier between them, then 50 back to back with no host wait whose inputs cycle through three
//! rounds, each launch's output copied and checked; then ops dropped with a launch in flight
//! and rebuilt in their heap memory, the last one checked). Layouts that need two
//! GPUs skip loudly on one unless MKERNEL_REQUIRE_GPUS=2, which turns the skip into a failure.
use mkernel::testing::{gpu_or_skip, gpus_or_skip, run_ranks};
use std::time::Duration;

fn allgather(nprocs: u32, nodes: u32, gpus: &[u32], shard: usize, iters: u32) {
    allgather_with(nprocs, nodes, gpus, shard, iters, &[]);
}

/// `extra`: options of `mkernel rank-check allgather` (`--copy lsu|bulk|fan|pull|ce`, `--in-place`,
/// `--graph`).
fn allgather_with(nprocs: u32, nodes: u32, gpus: &[u32], shard: usize, iters: u32, extra: &[&str]) {
    let (shard, iters) = (shard.to_string(), iters.to_string());
    let mut args = vec!["rank-check", "allgather", "--shard-bytes", &shard, "--iters", &iters];
    args.extend(extra);
    run_ranks(env!("CARGO_BIN_EXE_mkernel"), nprocs, nodes, gpus, &args, 120);
}

#[test]
fn fifo_from_gpu_threads() {
    let Some(g) = gpu_or_skip("fifo_from_gpu_threads") else { return };
    let (rate, rtt) = mkernel::bench::fifo_run(&g, 132, 128, 32, 500).unwrap();
    let mut us: Vec<f64> = rtt.iter().map(|&n| n as f64 / 1e3).collect();
    us.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert!(us[0] > 0.0, "round trips must take time");
    println!("fifo: {:.2} M commands/s, round trip median {:.2} us", rate / 1e6, us[us.len() / 2]);
}

#[test]
fn allgather_two_ranks_sharing_one_gpu() {
    // Both paths on one GPU: 1 node x 2 ranks (IPC-mapped peer memory), 2 nodes x 1 rank (FIFO,
    // proxy, emulated NIC).
    if gpu_or_skip("allgather_two_ranks_sharing_one_gpu").is_none() {
        return;
    }
    for shard in [17usize, 1_000_003, 4 << 20] {
        allgather(2, 1, &[0, 0], shard, 6);
        allgather(2, 2, &[0, 0], shard, 6);
    }
    // The copy engines between two processes' buffers on one GPU, launched through a graph.
    allgather_with(2, 1, &[0, 0], 1_000_003, 6, &["--copy", "ce", "--graph"]);
}

#[test]
fn allgather_absent_rank_is_reported() {
    // Rank 1 builds the op and never launches: rank 0's launch must end in a device-wait report
    // naming rank 1 (with the copy engines, before its context stops: no copy into a rank that
    // never became ready), bounded by the 1.5 s timeout, with SM copies and with the copy engines.
    let Some(_g) = gpu_or_skip("allgather_absent_rank_is_reported") else { return };
    let two = mkernel::gpu::device_count().unwrap_or(0) >= 2;
    let gpus: &[u32] = if two { &[0, 1] } else { &[0, 0] };
    for copy in ["lsu", "ce"] {
        let args = ["--copy", copy, "--absent-rank", "1", "--timeout-ms", "1500"];
        allgather_with(2, 1, gpus, 1_000_003, 1, &args);
    }
}

#[test]
fn allgather_one_node_two_gpus() {
    if !gpus_or_skip("allgather_one_node_two_gpus", 2) {
        return;
    }
    let modes = [
        &["--copy", "bulk"][..],
        &["--copy", "lsu"],
        &["--in-place"],
        &["--copy", "fan"],
        &["--copy", "fan", "--in-place"],
        &["--copy", "pull"],
        &["--copy", "pull", "--in-place"],
        &["--copy", "ce"],
        &["--copy", "ce", "--in-place", "--graph"],
    ];
    for extra in modes {
        for shard in [17usize, 1_000_003, 16 << 20, (16 << 20) + 48] {
            allgather_with(2, 1, &[0, 1], shard, 10, extra);
        }
    }
}

#[test]
fn allgather_two_emulated_nodes_one_gpu_each() {
    if !gpus_or_skip("allgather_two_emulated_nodes_one_gpu_each", 2) {
        return;
    }
    for shard in [17usize, 1_000_003, 16 << 20] {
        allgather(2, 2, &[0, 1], shard, 10);
    }
    allgather_with(2, 2, &[0, 1], 1_000_003, 10, &["--in-place"]);
    // No local peer: the copy engines copy nothing, the entering launch's inter-send CTA does it all.
    allgather_with(2, 2, &[0, 1], 1_000_003, 10, &["--copy", "ce"]);
}

#[test]
fn allgather_two_nodes_of_two_ranks() {
    // NVLink inside each emulated node, FIFO + emulated NIC between them.
    if !gpus_or_skip("allgather_two_nodes_of_two_ranks", 2) {
        return;
    }
    allgather(4, 2, &[0, 1, 0, 1], 1_000_003, 8);
}

#[test]
fn allgather_four_gpus_one_node_and_two_nodes() {
    if !gpus_or_skip("allgather_four_gpus_one_node_and_two_nodes", 4) {
        return;
    }
    for shard in [17usize, 1_000_003, 16 << 20] {
        allgather(4, 1, &[0, 1, 2, 3], shard, 6);
        allgather(4, 2, &[0, 1, 2, 3], shard, 6);
    }
    // Fan and LSU: each piece loaded once and stored to the three others (and this rank's own
    // output), by bulk copies or from every thread's registers; pull: each rank reads the
    // others' shards.
    let modes = [
        &["--copy", "lsu"][..],
        &["--copy", "lsu", "--in-place", "--intra-ctas", "5"],
        &["--copy", "fan"],
        &["--copy", "fan", "--in-place"],
        &["--copy", "pull"],
        &["--copy", "pull", "--in-place"],
        &["--copy", "ce"],
        &["--copy", "ce", "--in-place", "--graph"],
    ];
    for extra in modes {
        for shard in [17usize, 1_000_003, (16 << 20) + 48] {
            allgather_with(4, 1, &[0, 1, 2, 3], shard, 6, extra);
        }
        allgather_with(4, 2, &[0, 1, 2, 3], 1_000_003, 6, extra);
    }
    // Rank 3 never launches, across two nodes: ranks 0 and 1 (the other node) report their
    // inter-send CTA's wait for its `ready`, rank 2 its intra-node wait (with the copy engines
    // the entering launch's, which then stops that context). Every other rank must come back
    // with a report naming the wait, none with a bare launch failure.
    for copy in ["lsu", "ce"] {
        let args = ["--copy", copy, "--absent-rank", "3", "--timeout-ms", "1500"];
        allgather_with(4, 2, &[0, 1, 2, 3], 1_000_003, 1, &args);
    }
}

#[test]
fn staging_stream_copies_then_raises_flags_in_order() {
    // The host-staged RDMA path's memory half (CudaMem): pinned host slot -> GPU buffer, then the
    // flag, on one stream; tokens complete in order; GPU -> host back for the check.
    use mkernel::comm::transport::verbs::{engine::Mem, CudaMem};
    let Some(g) = gpu_or_skip("staging_stream_copies_then_raises_flags_in_order") else { return };
    let n = (1 << 20) + 37;
    let mut mem = CudaMem::new(0).unwrap();
    let slot = g.mapped::<u8>(n).unwrap();
    let back = g.mapped::<u8>(n).unwrap();
    let dev = g.alloc::<u8>(n).unwrap();
    let flag = g.upload(&[0u32]).unwrap();
    let mut rng = mkernel::testing::Rng::fresh("staging_stream");
    let data: Vec<u8> = (0..n).map(|_| rng.next_u32() as u8).collect();
    mem.write_host(slot.host_ptr() as u64, &data);
    dev.fill_bytes(0xa5).unwrap();
    let mut tokens = vec![mem.copy(dev.addr(), slot.host_ptr() as u64, n as u64).unwrap()];
    tokens.push(mem.set_u32(flag.addr(), 0x5eed).unwrap());
    tokens.push(mem.copy(back.host_ptr() as u64, dev.addr(), n as u64).unwrap());
    assert_eq!(tokens, [0, 1, 2], "tokens count operations in order");
    let start = std::time::Instant::now();
    while mem.done().unwrap() < 3 {
        assert!(start.elapsed() < Duration::from_secs(10), "staging stream stuck at {}", mem.done().unwrap());
    }
    let mut got = vec![0u8; n];
    mem.read_host(back.host_ptr() as u64, &mut got);
    assert!(got == data, "staged bytes differ after the round trip");
    assert_eq!(flag.to_vec().unwrap(), [0x5eed]);
}
