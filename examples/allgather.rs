//! The GPU-driven all-gather: every rank's shard lands in every rank's output, pushed over NVLink
//! by copy CTAs (and through the FIFO and proxy to other nodes).
//!
//! One process per GPU:
//! `cargo run --release -- launch -n 2 -- target/release/examples/allgather`
//! (alone it runs as a world of one).
use mkernel::comm::communicator::{CommOptions, Communicator};
use mkernel::comm::world::World;
use mkernel::ops::allgather::{AllGather, AllGatherOptions};
use mkernel::testing::gpu_or_skip;

fn main() -> Result<(), mkernel::Error> {
    let world = if std::env::var_os("RANK").is_some() { World::from_env()? } else { World::single(0) };
    // Opens MKERNEL_DEVICE (set per rank by `mkernel launch`), else GPU 0.
    let Some(gpu) = gpu_or_skip("example allgather") else { return Ok(()) };
    // Collective: every rank builds the communicator (bootstrap, symmetric heap, proxy) and the op.
    let comm = Communicator::new(&gpu, &world, CommOptions::from_env()?)?;
    let shard = 1 << 20;
    let ag = AllGather::new(&comm, &gpu, shard, AllGatherOptions::default())?;

    // Each rank's bytes say who sent them.
    ag.input().copy_from(&vec![world.rank as u8 + 1; shard])?;
    ag.run(&gpu)?; // launch, wait, barrier
    let out = ag.output().to_vec()?;
    for r in 0..world.world_size as usize {
        assert!(out[r * shard..(r + 1) * shard].iter().all(|&b| b == r as u8 + 1), "rank {r}'s shard is wrong");
    }
    println!(
        "rank {} of {}: gathered {} shards of {shard} bytes ({})",
        world.rank,
        world.world_size,
        world.world_size,
        comm.transport()
    );
    Ok(())
}
