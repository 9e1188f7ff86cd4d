//! `mkernel info`: the build, the GPUs and how they are linked, the RDMA devices, which transport
//! each layout would use, and a GEMM self-check on every Hopper GPU.
use anyhow::{bail, Context};
use mkernel::gemm::{BLayout, Gemm, GemmOptions, GemmShape, Output};
use mkernel::gpu::{self, topology, Gpu};
use mkernel::testing::Rng;

pub fn info() -> anyhow::Result<()> {
    let n = gpu::device_count()?;
    println!(
        "mkernel {} ({}): PTX module {} bytes, {} kernels, target sm_90a; {}",
        env!("CARGO_PKG_VERSION"),
        mkernel::bench::harness::COMMIT,
        gpu::kernels::PTX.len(),
        gpu::kernels::ALL.len(),
        match gpu::kernels::CUBIN.len() {
            0 => "no cubin (the build found no ptxas: the driver JIT-compiles the PTX)".to_string(),
            n => format!("cubin {n} bytes from {}", gpu::kernels::CUBIN_PTXAS),
        }
    );
    let rdma = topology::rdma_devices();
    if n == 0 {
        println!("no CUDA device found (no NVIDIA driver or no GPU here): nothing to check");
    } else {
        for i in 0..n {
            gpu_line(i)?;
        }
        print_topology(&topology::topology()?);
    }
    if rdma.is_empty() {
        println!("RDMA devices: none (/sys/class/infiniband is empty or absent)");
    } else {
        for d in &rdma {
            println!("RDMA device {}: PCI {} NUMA node {}", d.name, d.pci, d.numa_node);
        }
        print_rails(n);
    }
    println!("transports:");
    let p2p = n > 1 && topology::topology().map(|t| t.all_peer_access()).unwrap_or(false);
    println!(
        "  ranks on one node: {}",
        if n <= 1 {
            "NVLink/P2P through CUDA IPC (needs 2+ GPUs; ranks sharing one GPU also work)".to_string()
        } else if p2p {
            "NVLink/P2P through CUDA IPC: every GPU pair has peer access".to_string()
        } else {
            "unavailable: some GPU pairs lack peer access".to_string()
        }
    );
    println!(
        "  ranks on other nodes: {}",
        match rdma.first() {
            Some(_) => "RDMA verbs: RC queue pairs, or SRD on EFA devices, over each GPU's rails (GPUDirect registration, else host staging)".to_string(),
            None => "none here (no RDMA device); emulated nodes on this host use the emulated NIC".into(),
        }
    );
    Ok(())
}

/// Each GPU's rails: the NICs its rank's verbs transport would use (override: MKERNEL_IB_DEVICE).
fn print_rails(gpus: u32) {
    use mkernel::comm::transport::verbs::{plan_rails, rdma_devices, VerbsOptions};
    let opts = match VerbsOptions::from_env() {
        Ok(o) => o,
        Err(e) => return println!("rails: {e}"),
    };
    let present = rdma_devices();
    let show = |who: String, bus: Option<&str>| match plan_rails(&opts, bus, &present) {
        Ok(r) => println!("  {who}: {}", r.iter().map(|r| r.to_string()).collect::<Vec<_>>().join(", ")),
        Err(e) => println!("  {who}: {e}"),
    };
    println!("rails (the NICs each GPU's rank uses; PCIe switch, then NUMA node, then any):");
    if gpus == 0 {
        show("no GPU".into(), None);
    }
    for i in 0..gpus {
        let bus = topology::pci_bus_id(i).ok();
        show(format!("GPU {i} ({})", bus.as_deref().unwrap_or("bus id unknown")), bus.as_deref());
    }
}

fn gpu_line(i: u32) -> anyhow::Result<()> {
    let g = Gpu::new(i).with_context(|| format!("GPU {i}"))?;
    let d = g.info();
    println!(
        "GPU {i}: {} sm_{}{} {} SMs, {:.1} GiB, L2 {} MiB, {} KiB smem/block, driver {}.{}; module loaded in {:.0} ms: {}",
        d.name,
        d.compute_capability.0,
        d.compute_capability.1,
        d.sm_count,
        d.total_memory as f64 / (1u64 << 30) as f64,
        d.l2_bytes >> 20,
        d.max_smem_per_block >> 10,
        d.driver_version / 1000,
        d.driver_version % 1000 / 10,
        d.module_load.as_secs_f64() * 1e3,
        d.module_source
    );
    if d.compute_capability != (9, 0) {
        println!("  not a Hopper GPU: mkernel's kernels need sm_90a");
        return Ok(());
    }
    print!("  self-check (GEMM 1000x1544x4104 vs host reference, both B layouts): ");
    for layout in [BLayout::NK, BLayout::KN] {
        let err = self_check(&g, layout)?;
        if err > 4e-3 {
            println!("FAILED ({layout:?}: rel err {err:.2e})");
            bail!("GPU {i}: GEMM self-check failed");
        }
        print!("{layout:?} ok ({err:.1e}) ");
    }
    println!();
    Ok(())
}

fn print_topology(t: &topology::Topology) {
    if t.gpus.len() < 2 {
        return;
    }
    println!("topology (P = peer access, A = native atomics, NVL = NVLink, rank = driver's P2P performance rank):");
    print!("{:>6}", "");
    for g in &t.gpus {
        print!(" {:>14}", format!("GPU{}", g.ordinal));
    }
    println!();
    for (i, row) in t.links.iter().enumerate() {
        print!("{:>6}", format!("GPU{i}"));
        for l in row {
            let cell = match l {
                None => "X".to_string(),
                Some(l) => format!(
                    "{}{}{} r{}",
                    if l.peer_access { "P" } else { "-" },
                    if l.native_atomics { "A" } else { "-" },
                    match l.nvlink {
                        Some(true) => " NVL",
                        Some(false) => " PCIe",
                        None => " ?",
                    },
                    l.perf_rank
                ),
            };
            print!(" {cell:>14}");
        }
        let g = &t.gpus[i];
        println!("   {} NVLinks {}", g.pci_bus_id, g.nvlinks.map_or("unknown (no NVML)".into(), |n| n.to_string()));
    }
}

fn self_check(g: &Gpu, layout: BLayout) -> mkernel::Result<f64> {
    let shape = GemmShape { m: 1000, n: 1544, k: 4104 };
    let mut rng = Rng::new(7);
    let (a, b) = (rng.bf16_vec(shape.m * shape.k), rng.bf16_vec(shape.k * shape.n));
    let (da, db) = (g.upload(&a)?, g.upload(&b)?);
    let dc = g.alloc::<half::bf16>(shape.m * shape.n)?;
    dc.fill_bytes(0xff)?;
    Gemm::new(g, shape, layout, &da, &db, Output::Bf16(&dc), GemmOptions::default())?.run(g)?;
    let mut worst = 0f64;
    for i in [0, 1, 499, 998, 999] {
        let got: Vec<f64> = dc.slice(i * shape.n..(i + 1) * shape.n).to_vec()?.iter().map(|x| x.to_f64()).collect();
        let want = mkernel::gemm::reference_row(&a, &b, shape, layout, i);
        worst = worst.max(mkernel::testing::rel_err(&got, &want));
    }
    Ok(worst)
}
