//! `mkernel bench <op>`: every op through the one harness (`mkernel::bench::harness`), a table on
//! stdout, JSON lines with `--json`, progress on stderr when it is a terminal.
use crate::cmd_rank::as_rank;
use crate::{CopyArg, RanksArgs};
use anyhow::Context;
use mkernel::bench::{self, harness, RankGroup, Record, RunInfo, Timing};
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::gemm::{BLayout, GemmShape};
use mkernel::ops::allgather::{AllGather, AllGatherOptions};
use mkernel::Gpu;
use std::path::Path;

fn finish(records: &[Record], vs: Option<&str>, json: Option<&Path>) -> anyhow::Result<()> {
    harness::print_table(records, vs);
    if let Some(path) = json {
        harness::write_json(path, records).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// `bench gemm`: mkernel vs cuBLAS, interleaved, per shape and layout.
pub fn gemm(
    shapes: &[GemmShape],
    layouts: &[BLayout],
    opts: mkernel::gemm::GemmOptions,
    gather: bool,
    timing: Timing,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let g = Gpu::new(0)?;
    let cublas = match mkernel::baseline::Cublas::new(&g) {
        Ok(c) => {
            eprintln!("cuBLAS: {}", c.path);
            Some(c)
        }
        Err(e) => {
            eprintln!("cuBLAS unavailable, timing mkernel alone: {e}");
            None
        }
    };
    let bar = harness::progress((shapes.len() * layouts.len()) as u64, "bench gemm");
    let mut records = Vec::new();
    for &s in shapes {
        for &l in layouts {
            records.extend(bench::bench_gemm(&g, cublas.as_ref(), s, l, opts, gather, timing)?);
            bar.inc(1);
        }
    }
    bar.finish_and_clear();
    println!("GEMM bf16 -> bf16 on {}, median of {} interleaved launches (CUDA events)", g.info().name, timing.reps);
    finish(&records, Some("cublas"), json)?;
    // What each launch ran (the defaults' choice unless the flags forced one).
    for r in records.iter().filter(|r| r.imp == "mkernel") {
        let x = |k: &str| r.extra.get(k).map(|v| v.to_string()).unwrap_or_else(|| "-".into());
        println!(
            "plan {:<18} {:>2}: tile_n {:>3}  split_k {:>2}  stream_k {}  ctas {:>3}",
            r.shape,
            r.layout,
            x("tile_n"),
            x("split_k"),
            x("stream_k"),
            x("ctas")
        );
    }
    Ok(())
}

/// `bench attention`: mkernel's attention forward per config, layout and mask.
pub fn attention(
    configs: &[mkernel::attention::AttentionShape],
    layouts: &[mkernel::attention::AttnLayout],
    masks: &[bool],
    ctas: Option<u32>,
    timing: Timing,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let g = Gpu::new(0)?;
    let bar = harness::progress((configs.len() * layouts.len() * masks.len()) as u64, "bench attention");
    let mut records = Vec::new();
    for &s in configs {
        s.validate().with_context(|| format!("--configs {}", s.label()))?;
        for &l in layouts {
            for &causal in masks {
                records.push(bench::bench_attention(&g, s, l, causal, ctas, timing)?);
                bar.inc(1);
            }
        }
    }
    bar.finish_and_clear();
    println!(
        "attention forward (bf16, with log-sum-exp) on {}, median of {} launches (CUDA events); cuDNN / FA2: torch_baselines.py single",
        g.info().name,
        timing.reps
    );
    finish(&records, None, json)
}

/// How `bench allgather` runs the all-gather (its command-line options).
#[derive(Clone, Copy, Debug)]
pub struct AllgatherHow {
    pub intra_ctas: Option<u32>,
    pub copy: CopyArg,
    pub in_place: bool,
}

/// `bench allgather`, as ranks: the GPU-driven all-gather, and (one node) the copy engine moving
/// the same shard into a peer.
pub fn allgather(
    sizes: &[usize],
    AllgatherHow { intra_ctas, copy, in_place }: AllgatherHow,
    ranks: &RanksArgs,
    timing: Timing,
    json: Option<&Path>,
) -> anyhow::Result<()> {
    let Some(world) = as_rank(ranks)? else { return Ok(()) };
    let gpu = Gpu::new(world.device)?;
    let heap = 2 * sizes.iter().max().copied().unwrap_or(0) + (16 << 20);
    let comm = Communicator::new(&gpu, &world, CommOptions { heap_bytes: heap, ..CommOptions::from_env()? })?;
    let run = RunInfo { gpu: gpu.info().name.clone(), world: world.world_size, nodes: world.nodes };
    let mut group = RankGroup::new(&comm, &gpu, timing.device_barrier)?;
    // One more stream per peer, for the copy engines' all-gather at once (one node only).
    let side_streams = if world.nodes == 1 { world.world_size - 1 } else { 0 };
    let side = (0..side_streams).map(|_| Gpu::new(world.device)).collect::<Result<Vec<_>, _>>()?;
    let mut records = Vec::new();
    for &total in sizes {
        let w = world.world_size as usize;
        anyhow::ensure!(total >= w, "--sizes: {total} bytes cannot be split over {w} ranks");
        let shard = total / w;
        let opts = AllGatherOptions { intra_ctas, copy: copy.into(), in_place, ..Default::default() };
        let ag = AllGather::new(&comm, &gpu, shard, opts)?;
        let ms = harness::time_ms(&gpu, &mut group, timing, || ag.launch(&gpu))?;
        ag.wait(&gpu)?;
        let busbw = (total as f64) * (w as f64 - 1.0) / w as f64;
        records.push(
            run.record("all_gather", total.to_string(), "-", "mkernel", ms)
                .with_bytes(busbw)
                .with("intra_ctas", ag.intra_ctas())
                .with("copy", format!("{:?}", ag.copy()).to_lowercase())
                .with("in_place", in_place)
                .timed_with(timing),
        );
        // The copy engine pushing this rank's shard into the next local rank's output: the bytes
        // the kernel's CTAs move over NVLink to one peer, for the "share of the copy engine".
        if world.nodes == 1 && world.world_size > 1 {
            // Where this rank's shard goes in every other rank's output, the next rank first.
            let dsts = (1..world.world_size)
                .map(|k| {
                    let peer = (world.rank + k) % world.world_size;
                    Ok(ag.peer_output(peer).context("peer output not mapped")? + (world.rank as usize * shard) as u64)
                })
                .collect::<anyhow::Result<Vec<_>>>()?;
            let src = ag.input().addr();
            let ms = harness::time_ms(&gpu, &mut group, timing, || {
                // SAFETY: both ranges are `shard` bytes of live buffers owned by `ag` (ours, and
                // the peer's mapped output, kept alive until the closing barrier below).
                unsafe { gpu.copy_async(dsts[0], src, shard)? };
                Ok(())
            })?;
            records.push(
                // Tagged with the run's mode so that `mkernel plot` draws it beside that run.
                run.record("all_gather", total.to_string(), "-", "copy-engine-p2p", ms)
                    .with_bytes(shard as f64)
                    .with("in_place", in_place)
                    .timed_with(timing),
            );
            // The copy engines doing the whole all-gather (this rank's shard into every other
            // rank's output): one stream per peer, all at once; and one peer after another on
            // one stream (each step then a ring shift across the ranks).
            let at_once = harness::time_ms(&gpu, &mut group, timing, || {
                // Fork every side stream first, then join them all: a join before the next
                // fork would order the copies one after another.
                for s in &side {
                    s.wait_for(&gpu)?;
                }
                for (s, &dst) in side.iter().zip(&dsts) {
                    // SAFETY: as above, for every peer's mapped output.
                    unsafe { s.copy_async(dst, src, shard)? };
                }
                for s in &side {
                    gpu.wait_for(s)?;
                }
                Ok(())
            })?;
            let stepped = harness::time_ms(&gpu, &mut group, timing, || {
                for &dst in &dsts {
                    // SAFETY: as above.
                    unsafe { gpu.copy_async(dst, src, shard)? };
                }
                Ok(())
            })?;
            for (impl_name, ms) in [("copy-engine-allgather", at_once), ("copy-engine-allgather-stepped", stepped)] {
                records.push(
                    run.record("all_gather", total.to_string(), "-", impl_name, ms)
                        .with_bytes(busbw)
                        .with("in_place", in_place)
                        .timed_with(timing),
                );
            }
        }
        comm.barrier()?;
    }
    if world.rank == 0 {
        println!(
            "all-gather, {} ranks on {} node(s), slowest rank's median of {} launches",
            world.world_size, world.nodes, timing.reps
        );
        finish(&records, None, json)?;
    }
    Ok(())
}

/// `bench fifo`: GPU -> proxy throughput and GPU -> proxy -> GPU round trips.
pub fn fifo(blocks: u32, threads: u32, per_thread: u32, rounds: u32, matrix: bool) -> anyhow::Result<()> {
    use mkernel::bench::{fifo_roundtrips, fifo_throughput, FifoBench};
    let gpu = Gpu::new(0)?;
    let mut configs = vec![FifoBench { blocks, threads, per_thread, ..Default::default() }];
    if matrix {
        for capacity in [1024u64, 4096, 16384] {
            for (blocks, threads, per) in [(132u32, 128u32, 32u32), (132, 32, 128), (16, 32, 1024)] {
                for verify in [true, false] {
                    configs.push(FifoBench { blocks, threads, per_thread: per, capacity, verify, max_batch: 32 });
                }
            }
        }
        configs.push(FifoBench { max_batch: 128, verify: false, ..Default::default() });
    }
    for c in configs {
        let rate = fifo_throughput(&gpu, c)?;
        println!(
            "fifo throughput: {:6.2} M commands/s  ({} GPU threads x {}, ring {}, batch {}, {})",
            rate / 1e6,
            c.blocks * c.threads,
            c.per_thread,
            c.capacity,
            c.max_batch,
            if c.verify { "every command checked" } else { "counted only" }
        );
    }
    let mut rtt: Vec<f64> = fifo_roundtrips(&gpu, rounds)?.iter().map(|&x| x as f64 / 1e3).collect();
    rtt.sort_by(|a, b| a.total_cmp(b));
    println!(
        "fifo round trip GPU->proxy->GPU: median {:.2} us, p99 {:.2} us ({} rounds)",
        rtt[rtt.len() / 2],
        rtt[(rtt.len() * 99 / 100).min(rtt.len() - 1)],
        rtt.len()
    );
    Ok(())
}

/// `bench stream-wait`: how soon a side stream follows a word a kernel holding every SM raises
/// (`mkernel::bench::stream_wait`), each reaction's latencies in microseconds; with `peer_mib`,
/// copies of that size into GPU 1 too (`mkernel::bench::peer_copies`).
pub fn stream_wait(raises: u32, period_us: u32, runs: u32, peer_mib: Option<u32>) -> anyhow::Result<()> {
    use mkernel::bench::{peer_copies, stream_wait, Latencies, StreamWaitProbe};
    let gpu = Gpu::new(0)?;
    let peer = peer_mib.map(|_| Gpu::new(1)).transpose()?;
    let probe = StreamWaitProbe { raises, period: std::time::Duration::from_micros(period_us as u64) };
    println!("stream-wait probe: {raises} raises {period_us} us apart, {runs} runs; latency after the raise (us, launch start-up included)");
    let show = |run: u32, l: &Latencies, bytes: Option<usize>| {
        let mut v = l.us.clone();
        v.sort_by(|a, b| a.total_cmp(b));
        let at = |q: usize| v[(v.len() * q / 100).min(v.len() - 1)];
        let rate = bytes.map(|b| format!(", {:.0} GB/s over the span", (b * v.len()) as f64 / l.span_us / 1e3));
        println!(
            "run {run} {:<30} min {:7.1} p10 {:7.1} median {:7.1} p90 {:7.1} max {:7.1}  span {:8.1}{}  first five {:?}",
            l.reaction.name(),
            v[0],
            at(10),
            at(50),
            at(90),
            v[v.len() - 1],
            l.span_us,
            rate.unwrap_or_default(),
            l.us.iter().take(5).map(|x| (x * 10.0).round() / 10.0).collect::<Vec<_>>()
        );
    };
    for run in 0..runs {
        for l in stream_wait(&gpu, probe)? {
            show(run, &l, None);
        }
        if let (Some(peer), Some(mib)) = (&peer, peer_mib) {
            let bytes = (mib as usize) << 20;
            for l in peer_copies(&gpu, peer, probe, bytes)? {
                show(run, &l, Some(bytes));
            }
        }
    }
    Ok(())
}
