//! Communication primitives any role of any kernel can call, with any thread count:
//! NVLink copies into peers' memory ([`nvlink`]), flags and last-arriver counters ([`signal`]),
//! the launch epoch ([`signal::launch_epoch`]), and commands for the CPU proxy ([`fifo`]).
pub mod fifo;
pub mod nvlink;
pub mod signal;

pub use fifo::{fifo_push, signal_remote};
