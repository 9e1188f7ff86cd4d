//! AllGather + GEMM in one persistent launch: every rank holds `A_r[M/W, K]` and its `B`, and
//! gets `C = allgather(A) @ B` and the gathered A. Compute CTAs start on local rows while copy
//! CTAs push the shard to the peers; each tile waits only for the rows it reads.
//!
//! One process per GPU:
//! `cargo run --release -- launch -n 2 -- target/release/examples/ag_gemm`
//! (alone it runs as a world of one).
use half::bf16;
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::world::World;
use mkernel::gemm::{BLayout, GemmShape, Output};
use mkernel::ops::ag_gemm::{AgGemm, AgGemmOptions, AgInput};
use mkernel::testing::{gpu_or_skip, Rng};

fn main() -> Result<(), mkernel::Error> {
    let world = if std::env::var_os("RANK").is_some() { World::from_env()? } else { World::single(0) };
    let Some(gpu) = gpu_or_skip("example ag_gemm") else { return Ok(()) };
    let comm = Communicator::new(&gpu, &world, CommOptions::from_env()?)?;

    let w = world.world_size as usize;
    let shape = GemmShape { m: 4096 * w, n: 4096, k: 4096 }; // M in all: M / W rows per rank
    let rows = shape.m / w;
    let mut rng = Rng::new(7 + world.rank as u64);
    let a = gpu.upload(&rng.bf16_vec(rows * shape.k))?; // this rank's shard of the activations
    let b = gpu.upload(&rng.bf16_vec(shape.k * shape.n))?; // this rank's column shard of a weight, [K, N]
    let c = gpu.alloc::<bf16>(shape.m * shape.n)?;

    // Collective: shapes are checked across ranks; the op picks fused or unfused per shape.
    let op = AgGemm::new(
        &comm,
        &gpu,
        shape,
        BLayout::KN,
        AgInput::Buffer(&a),
        &b,
        Output::Bf16(&c),
        AgGemmOptions::default(),
    )?;
    op.run(&gpu)?;
    let ms = gpu.time_ms(|| op.launch(&gpu).map_err(|e| mkernel::GpuError::Module(e.to_string())))?;
    op.wait(&gpu)?;
    println!(
        "rank {} of {}: ag_gemm {}x{}x{} via the {} path ({:?}): {:.3} ms",
        world.rank,
        world.world_size,
        shape.m,
        shape.n,
        shape.k,
        op.path().name(),
        op.split(),
        ms
    );
    Ok(())
}
