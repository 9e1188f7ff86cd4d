//! Communication primitives any role of any kernel can call, with any thread count:
//! NVLink copies into peers' memory ([`nvlink`]), flags and last-arriver counters ([`signal`]),
//! the launch epoch ([`signal::launch_epoch`]), and commands for the CPU proxy ([`fifo`]).
pub mod fifo;
pub mod nvlink;
pub mod signal;

pub use fifo::{fifo_push, fifo_quiet, fifo_quiet_claimed, signal_remote};

pub use crate::sched::next_peer;

/// The node's other local ranks from the next ([`next_peer`] `1..local_world`), with their
/// distance `i`.
#[inline(always)]
pub fn peers_from_next(local_rank: u32, local_world: u32) -> impl Iterator<Item = (u32, u32)> {
    (1..local_world).map(move |i| (i, next_peer(local_rank, local_world, i)))
}
