//! `mkernel rank-check soak`: thousands of back-to-back launches of each op (GEMM, attention,
//! all-gather, AllGather + GEMM, GEMM + ReduceScatter / AllReduce, MoE, ring attention) on every
//! rank, checking that nothing drifts or
//! leaks: the time per launch (first batch against the last), the device's free memory and this
//! process's open file descriptors (before and after), and the output (bitwise the same as after
//! the first launch: every op here is deterministic).
use anyhow::{ensure, Context};
use clap::Args;
use half::bf16;
use mkernel::attention::{Attention, AttentionOptions, AttentionShape, AttnLayout};
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::world::World;
use mkernel::gemm::{BLayout, Gemm, GemmOptions, GemmShape, Output};
use mkernel::ops::ag_gemm::{AgGemm, AgGemmOptions, AgInput};
use mkernel::ops::allgather::{AllGather, AllGatherOptions};
use mkernel::ops::gemm_rs::{Collective, GemmRs, GemmRsOptions};
use mkernel::ops::moe::{MoeDispatchGemm, MoeOptions, MoeShape};
use mkernel::ops::ring_attention::{RingAttention, RingOptions};
use mkernel::ops::PathChoice;
use mkernel::testing::Rng;
use mkernel::Gpu;

/// `rank-check soak`.
#[derive(Args, Debug)]
pub struct SoakArgs {
    /// Launches of each op (timed in ten batches).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u32).range(10..=10_000_000))]
    pub launches: u32,
    /// Largest allowed drift: the median time per launch of the last three batches over that of
    /// batches two to four.
    #[arg(long = "max-drift", default_value_t = 1.25)]
    pub max_drift: f64,
}

/// Open file descriptors of this process.
fn open_fds() -> anyhow::Result<usize> {
    Ok(std::fs::read_dir("/proc/self/fd").context("listing /proc/self/fd")?.count())
}

/// One op under soak: launch it `n` times in ten timed batches, then compare.
struct Soak<'a> {
    gpu: &'a Gpu,
    rank: u32,
    launches: u32,
    max_drift: f64,
}

impl Soak<'_> {
    fn run(
        &self,
        name: &str,
        launch: &dyn Fn() -> mkernel::Result<()>,
        wait: &dyn Fn() -> mkernel::Result<()>,
        output: &dyn Fn() -> mkernel::Result<Vec<u8>>,
    ) -> anyhow::Result<()> {
        launch()?;
        wait()?;
        let first = output()?;
        let (fds0, (free0, _)) = (open_fds()?, self.gpu.memory_info()?);
        let per = self.launches / 10;
        let mut ms = Vec::with_capacity(10);
        for _ in 0..10 {
            let mut failed = None;
            let t = self.gpu.time_ms(|| {
                for _ in 0..per {
                    if let Err(e) = launch() {
                        failed = Some(e);
                        break;
                    }
                }
                Ok(())
            })?;
            if let Some(e) = failed {
                return Err(e.into());
            }
            ms.push(t as f64 / per as f64);
        }
        wait()?;
        let last = output()?;
        let (fds1, (free1, _)) = (open_fds()?, self.gpu.memory_info()?);
        let fastest = ms.iter().cloned().fold(f64::INFINITY, f64::min);
        // Drift: the last three batches against the three after the first (the first may carry
        // warm-up), medians, so that one batch stretched by a host hiccup between launches does
        // not count as a slowdown.
        let median3 = |v: &[f64]| {
            let mut v = v.to_vec();
            v.sort_by(f64::total_cmp);
            v[1]
        };
        let drift = median3(&ms[7..10]) / median3(&ms[1..4]);
        let r = self.rank;
        ensure!(last == first, "rank {r}: {name}: the output after {} launches differs from the first's", 10 * per);
        ensure!(fds1 == fds0, "rank {r}: {name}: open file descriptors {fds0} -> {fds1}");
        ensure!(free1 == free0, "rank {r}: {name}: free device memory {free0} -> {free1} bytes");
        ensure!(
            drift <= self.max_drift,
            "rank {r}: {name}: time per launch drifted {drift:.3}x; batches (ms per launch): {ms:.4?}"
        );
        println!(
            "soak ok: rank {r} {name}: {} launches, ms per launch by batch of {per}: first {:.4}, fastest {fastest:.4}, last {:.4} (drift, last three batches over the second to fourth: {drift:.3}); free device memory {free0} = {free1} B; open fds {fds0} = {fds1}; output identical",
            1 + 10 * per,
            ms[0],
            ms[9]
        );
        Ok(())
    }
}

/// Every rank soaks every op in the same order (the collective ones need all ranks).
pub fn soak(a: SoakArgs) -> anyhow::Result<()> {
    let world = World::from_env()?;
    let gpu = Gpu::new(world.device)?;
    let comm = Communicator::new(&gpu, &world, CommOptions { heap_bytes: 1 << 30, ..CommOptions::from_env()? })?;
    let s = Soak { gpu: &gpu, rank: world.rank, launches: a.launches, max_drift: a.max_drift };
    let mut rng = Rng::new(0x50a4 ^ world.rank as u64);
    let bytes = |v: Vec<bf16>| -> Vec<u8> { bytemuck::cast_slice(&v).to_vec() };

    // GEMM.
    {
        let shape = GemmShape { m: 4096, n: 4096, k: 4096 };
        let (ga, gb) = (gpu.upload(&rng.bf16_vec(shape.m * shape.k))?, gpu.upload(&rng.bf16_vec(shape.k * shape.n))?);
        let gc = gpu.alloc::<bf16>(shape.m * shape.n)?;
        let gemm = Gemm::new(&gpu, shape, BLayout::NK, &ga, &gb, Output::Bf16(&gc), GemmOptions::default())?;
        s.run("gemm 4096^3", &|| gemm.launch(&gpu), &|| gemm.run(&gpu), &|| Ok(bytes(gc.to_vec()?)))?;
    }

    // Attention.
    {
        let sh = AttentionShape { batch: 2, heads: 16, heads_kv: 16, seq_q: 2048, seq_k: 2048, head_dim: 128 };
        let (q, k, v) = (
            gpu.upload(&rng.bf16_vec(sh.q_elements()))?,
            gpu.upload(&rng.bf16_vec(sh.kv_elements()))?,
            gpu.upload(&rng.bf16_vec(sh.kv_elements()))?,
        );
        let o = gpu.alloc::<bf16>(sh.q_elements())?;
        let opts = AttentionOptions { causal: true, ..Default::default() };
        let attn = Attention::new(&gpu, sh, AttnLayout::Bhsd, (&q, &k, &v), &o, None, opts)?;
        s.run("attention 2x16x2048x128 causal", &|| attn.launch(&gpu), &|| attn.run(&gpu), &|| Ok(bytes(o.to_vec()?)))?;
    }

    // All-gather.
    {
        let shard = 8 << 20;
        let ag = AllGather::new(&comm, &gpu, shard, AllGatherOptions::default())?;
        ag.input()
            .copy_from(&(0..shard).map(|i| (i as u8) ^ (world.rank as u8).wrapping_mul(37)).collect::<Vec<u8>>())?;
        s.run("all-gather 8 MiB per rank", &|| ag.launch(&gpu), &|| ag.wait(&gpu), &|| Ok(ag.output().to_vec()?))?;
    }
    comm.barrier()?;

    // AllGather + GEMM.
    {
        let shape = GemmShape { m: 4096, n: 4096, k: 4096 };
        let rows = shape.m / world.world_size as usize;
        let (a_r, b) = (gpu.upload(&rng.bf16_vec(rows * shape.k))?, gpu.upload(&rng.bf16_vec(shape.k * shape.n))?);
        let c = gpu.alloc::<bf16>(shape.m * shape.n)?;
        let op = AgGemm::new(
            &comm,
            &gpu,
            shape,
            BLayout::KN,
            AgInput::Buffer(&a_r),
            &b,
            Output::Bf16(&c),
            AgGemmOptions::default(),
        )?;
        s.run(&format!("ag-gemm 4096^3 ({:?})", op.path()), &|| op.launch(&gpu), &|| op.wait(&gpu), &|| {
            Ok(bytes(c.to_vec()?))
        })?;
    }
    comm.barrier()?;

    // GEMM + ReduceScatter and GEMM + AllReduce (fused path).
    for collective in [Collective::ReduceScatter, Collective::AllReduce] {
        let shape = GemmShape { m: 4096, n: 4096, k: 4096 };
        let w = world.world_size as usize;
        let (a_r, b) =
            (gpu.upload(&rng.bf16_vec(shape.m * shape.k / w))?, gpu.upload(&rng.bf16_vec(shape.k / w * shape.n))?);
        let opts = GemmRsOptions { path: PathChoice::Fused, ..Default::default() };
        let op = GemmRs::new(&comm, &gpu, collective, shape, BLayout::NK, &a_r, &b, opts)?;
        let name = format!("gemm {collective:?} 4096^3");
        s.run(&name, &|| op.launch(&gpu), &|| op.wait(&gpu), &|| Ok(op.output_bytes().to_vec()?))?;
        drop(op);
        comm.barrier()?;
    }

    // MoE dispatch + grouped GEMM (fused path), uniform routing.
    {
        let shape = MoeShape { hidden: 1024, inter: 1024, experts: 8 * world.world_size as usize, top_k: 2 };
        let tokens = 2048;
        let (idx, wt) = crate::cmd_moe::routing(0x50a4, 0, world.rank, tokens, shape, crate::cmd_moe::Routing::Uniform);
        let x = gpu.upload(&rng.bf16_vec(tokens * shape.hidden))?;
        let (idx, wt) = (gpu.upload(&idx)?, gpu.upload(&wt)?);
        let w1 =
            gpu.upload(&rng.bf16_vec(shape.local_experts(world.world_size as usize) * shape.hidden * shape.inter))?;
        let opts = MoeOptions { path: PathChoice::Fused, ..Default::default() };
        let op = MoeDispatchGemm::new(&comm, &gpu, shape, BLayout::KN, &x, &idx, &wt, &w1, tokens, opts)?;
        let name = "moe 2048 tokens x 1024 x 1024, 8 experts per rank, top-2";
        s.run(name, &|| op.launch(&gpu), &|| op.wait(&gpu), &|| Ok(op.output_bytes().to_vec()?))?;
    }
    comm.barrier()?;

    // Ring attention.
    {
        let sh = AttentionShape { batch: 1, heads: 8, heads_kv: 8, seq_q: 2048, seq_k: 2048, head_dim: 128 };
        let q = gpu.upload(&rng.bf16_vec(sh.q_elements()))?;
        let o = gpu.alloc::<bf16>(sh.q_elements())?;
        let ring = RingAttention::new(
            &comm,
            &gpu,
            sh,
            AttnLayout::Bhsd,
            &q,
            &o,
            None,
            RingOptions { causal: true, ..Default::default() },
        )?;
        ring.k().copy_from(&rng.bf16_vec(sh.kv_elements()))?;
        ring.v().copy_from(&rng.bf16_vec(sh.kv_elements()))?;
        comm.barrier()?;
        s.run("ring attention 1x8x2048x128 causal", &|| ring.launch(&gpu), &|| ring.wait(&gpu), &|| {
            Ok(bytes(o.to_vec()?))
        })?;
    }
    comm.barrier()?;
    println!("soak ok: rank {} of {} ({} node(s)): every op", world.rank, world.world_size, world.nodes);
    Ok(())
}
