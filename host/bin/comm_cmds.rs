//! `mkernel launch`, the per-rank checks the multi-process tests run, and the communication
//! benchmarks.
use mkernel::bench::median;
use mkernel::comm::allgather::{AllGather, AllGatherOptions, NvlinkCopy};
use mkernel::comm::bootstrap::Bootstrap;
use mkernel::comm::launch::{launch, LaunchSpec};
use mkernel::comm::world::World;
use mkernel::Gpu;
use std::time::Duration;

type R = Result<(), String>;

fn opt<T: std::str::FromStr>(args: &[String], name: &str, default: T) -> Result<T, String> {
    match args.iter().position(|a| a == name) {
        Some(i) => {
            args.get(i + 1).ok_or(format!("{name} needs a value"))?.parse().map_err(|_| format!("{name}: bad value"))
        }
        None => Ok(default),
    }
}

/// `mkernel launch -n N [--nodes K] [--gpus a,b,..] [--timeout-s T] -- program args..`
pub fn cmd_launch(args: &[String]) -> R {
    let split = args.iter().position(|a| a == "--").ok_or("launch: put `--` before the program")?;
    let (opts, prog) = (&args[..split], &args[split + 1..]);
    let program = prog.first().ok_or("launch: no program after `--`")?;
    let gpus = match opts.iter().position(|a| a == "--gpus") {
        Some(i) => Some(
            opts.get(i + 1)
                .ok_or("--gpus needs a list")?
                .split(',')
                .map(|g| g.parse().map_err(|_| format!("--gpus: bad ordinal {g}")))
                .collect::<Result<Vec<u32>, _>>()?,
        ),
        None => None,
    };
    let timeout: u64 = opt(opts, "--timeout-s", 0)?;
    let spec = LaunchSpec {
        nprocs: opt(opts, "-n", 1)?,
        nodes: opt(opts, "--nodes", 1)?,
        gpus,
        program: program.into(),
        args: prog[1..].iter().map(Into::into).collect(),
        env: Vec::new(),
        timeout: (timeout > 0).then(|| Duration::from_secs(timeout)),
    };
    launch(&spec).map_err(|e| e.to_string())
}

/// Payload byte `i` of rank `r`'s shard in round `it`: encodes the source rank.
pub fn pattern(r: u32, it: u32, i: usize) -> u8 {
    let x = (i as u32).wrapping_mul(2_654_435_761) ^ it.wrapping_mul(40503) ^ r.wrapping_mul(0x9e37);
    ((x >> 13) as u8) ^ (r as u8).wrapping_mul(31)
}

/// `mkernel rank-check bootstrap|allgather ...` (run as one rank, under `mkernel launch`).
pub fn cmd_rank_check(args: &[String]) -> R {
    let world = World::from_env().map_err(|e| e.to_string())?;
    let timeout = Duration::from_millis(opt(args, "--timeout-ms", 10_000)?);
    match args.first().map(String::as_str) {
        Some("bootstrap") => {
            let mut boot = Bootstrap::connect(&world, timeout).map_err(|e| e.to_string())?;
            for round in 0..3u32 {
                let mine: Vec<u8> = (0..(world.rank as usize + 1) * 7).map(|i| pattern(world.rank, round, i)).collect();
                let all = boot.all_gather(&mine).map_err(|e| e.to_string())?;
                for (r, b) in all.iter().enumerate() {
                    let want: Vec<u8> = (0..(r + 1) * 7).map(|i| pattern(r as u32, round, i)).collect();
                    if *b != want {
                        return Err(format!("round {round}: blob from rank {r} is wrong"));
                    }
                }
            }
            boot.barrier().map_err(|e| e.to_string())?;
            println!("bootstrap ok: rank {} of {}", world.rank, world.world_size);
            Ok(())
        }
        Some("allgather") => allgather_check(&world, timeout, args),
        _ => Err("rank-check bootstrap|allgather".into()),
    }
}

fn allgather_check(world: &World, timeout: Duration, args: &[String]) -> R {
    let shard: usize = opt(args, "--shard-bytes", 1_000_003)?;
    let iters: u32 = opt(args, "--iters", 20)?;
    let gpu = Gpu::new(world.device).map_err(|e| e.to_string())?;
    let mut boot = Bootstrap::connect(world, timeout).map_err(|e| e.to_string())?;
    let opts = AllGatherOptions {
        intra_ctas: opt(args, "--intra-ctas", 8)?,
        copy: opt(args, "--copy", NvlinkCopy::Bulk)?,
        in_place: args.iter().any(|a| a == "--in-place"),
        chunk_bytes: opt(args, "--chunk-bytes", 256 << 10)?,
        ..Default::default()
    };
    let mut ag = AllGather::new(&gpu, &mut boot, world, shard, opts).map_err(|e| e.to_string())?;
    let w = world.world_size as usize;
    let verify = |ag: &AllGather, it: u32| -> R {
        let out = ag.output().to_vec().map_err(|e| e.to_string())?;
        for r in 0..w {
            for i in 0..shard {
                if out[r * shard + i] != pattern(r as u32, it, i) {
                    return Err(format!(
                        "rank {}: launch {it}: byte {i} of rank {r}'s shard is wrong ({} vs {})",
                        world.rank,
                        out[r * shard + i],
                        pattern(r as u32, it, i)
                    ));
                }
            }
        }
        Ok(())
    };
    // New data every launch: run() ends with a barrier, so nobody overwrites data still read.
    for it in 0..iters {
        let mine: Vec<u8> = (0..shard).map(|i| pattern(world.rank, it, i)).collect();
        ag.output().copy_from(&vec![0xa5; w * shard]).map_err(|e| e.to_string())?;
        ag.input().copy_from(&mine).map_err(|e| e.to_string())?; // after the poison: may alias it
        boot.barrier().map_err(|e| e.to_string())?; // everyone poisoned before anyone writes
        ag.run(&gpu, &mut boot).map_err(|e| e.to_string())?;
        verify(&ag, it)?;
    }
    // Many launches back to back, no host synchronisation and no reset in between.
    for _ in 0..50 {
        ag.launch(&gpu).map_err(|e| e.to_string())?;
    }
    ag.wait(&gpu).map_err(|e| e.to_string())?;
    verify(&ag, iters - 1)?;
    boot.barrier().map_err(|e| e.to_string())?;
    println!("allgather ok: rank {} of {} ({} nodes), shard {shard} B, {iters} checked launches + 50 back to back; proxy {:?}", world.rank, world.world_size, world.nodes, ag.proxy_stats());
    Ok(())
}

/// `mkernel bench allgather [--sizes bytes,..] [--reps R] [--intra-ctas C] [--copy lsu|bulk]
/// [--in-place] [--json F]`, as a rank.
pub fn cmd_bench_allgather(args: &[String]) -> R {
    let world = World::from_env().map_err(|e| e.to_string())?;
    let sizes: String = opt(args, "--sizes", "1048576,16777216,268435456".to_string())?;
    let reps: usize = opt(args, "--reps", 20)?;
    let ctas: u32 = opt(args, "--intra-ctas", 16)?;
    let copy: NvlinkCopy = opt(args, "--copy", NvlinkCopy::Bulk)?;
    let in_place = args.iter().any(|a| a == "--in-place");
    let json: String = opt(args, "--json", String::new())?;
    let gpu = Gpu::new(world.device).map_err(|e| e.to_string())?;
    let mut boot = Bootstrap::connect(&world, Duration::from_secs(30)).map_err(|e| e.to_string())?;
    let mut lines = Vec::new();
    for total in sizes.split(',').map(|s| s.parse::<usize>().map_err(|_| format!("bad size {s}"))) {
        let total = total?;
        let shard = total / world.world_size as usize;
        let opts = AllGatherOptions { intra_ctas: ctas, copy, in_place, ..Default::default() };
        let mut ag = AllGather::new(&gpu, &mut boot, &world, shard, opts).map_err(|e| e.to_string())?;
        for _ in 0..3 {
            ag.launch(&gpu).map_err(|e| e.to_string())?;
        }
        ag.wait(&gpu).map_err(|e| e.to_string())?;
        boot.barrier().map_err(|e| e.to_string())?;
        let mut ts = Vec::new();
        for _ in 0..reps {
            let ms = gpu
                .time_ms(|| ag.launch(&gpu).map_err(|e| mkernel::GpuError::Module(e.to_string())))
                .map_err(|e| e.to_string())?;
            ts.push(ms as f64);
        }
        ag.wait(&gpu).map_err(|e| e.to_string())?;
        // Baseline: the copy engine pushing this rank's shard into the next local rank's output
        // (the same bytes the kernel's CTAs move over NVLink), one rank at a time.
        let mut ce = Vec::new();
        if world.nodes == 1 && world.world_size > 1 {
            let peer_rank = world.local_to_global((world.local_rank + 1) % world.local_world_size);
            let dst = ag.peer_output(peer_rank).ok_or("peer output not mapped")? + (world.rank as usize * shard) as u64;
            for _ in 0..reps {
                boot.barrier().map_err(|e| e.to_string())?;
                let ms = gpu.time_ms(|| {
                    // SAFETY: both ranges are ours and shard bytes long.
                    let r = unsafe {
                        cust_raw::cuMemcpyDtoDAsync_v2(dst, ag.input().addr(), shard, gpu.stream().as_inner())
                    };
                    if r as u32 != 0 {
                        return Err(mkernel::GpuError::Module(format!("cuMemcpyDtoDAsync: {r:?}")));
                    }
                    Ok(())
                });
                ce.push(ms.map_err(|e| e.to_string())? as f64);
            }
        }
        boot.barrier().map_err(|e| e.to_string())?;
        let t = median(ts);
        let w = world.world_size as f64;
        let busbw = total as f64 * (w - 1.0) / w / t / 1e6;
        // What one rank pushes to one peer per launch, over the kernel's time: comparable with the
        // copy engine's rate below.
        let line = format!(
            "{{\"op\":\"all_gather\",\"impl\":\"mkernel\",\"world\":{},\"nodes\":{},\"bytes\":{total},\"ms\":{t:.5},\"busbw_gbps\":{busbw:.2},\"intra_ctas\":{ctas},\"copy\":\"{copy:?}\",\"in_place\":{in_place},\"p2p_copy_engine_ms\":{},\"p2p_copy_engine_gbps\":{}}}",
            world.world_size,
            world.nodes,
            if ce.is_empty() { "null".into() } else { format!("{:.5}", median(ce.clone())) },
            if ce.is_empty() { "null".into() } else { format!("{:.1}", shard as f64 / median(ce) / 1e6) }
        );
        if world.rank == 0 {
            println!("{line}");
        }
        lines.push(line);
    }
    if world.rank == 0 && !json.is_empty() {
        std::fs::write(&json, lines.join("\n") + "\n").map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// `mkernel bench fifo [--rounds R] [--matrix]`: GPU -> proxy throughput and GPU -> proxy -> GPU
/// round-trip latency on one GPU; `--matrix` also varies ring size, producers and checking.
pub fn cmd_bench_fifo(args: &[String]) -> R {
    use mkernel::bench::{fifo_roundtrips, fifo_throughput, FifoBench};
    let gpu = Gpu::new(0).map_err(|e| e.to_string())?;
    let rounds: u32 = opt(args, "--rounds", 2000)?;
    let mut configs = vec![FifoBench::default()];
    if args.iter().any(|a| a == "--matrix") {
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
        let rate = fifo_throughput(&gpu, c).map_err(|e| e.to_string())?;
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
    let mut rtt: Vec<f64> =
        fifo_roundtrips(&gpu, rounds).map_err(|e| e.to_string())?.iter().map(|&x| x as f64 / 1e3).collect();
    rtt.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!(
        "fifo round trip GPU->proxy->GPU: median {:.2} us, p99 {:.2} us ({} rounds)",
        rtt[rtt.len() / 2],
        rtt[rtt.len() * 99 / 100],
        rtt.len()
    );
    Ok(())
}
