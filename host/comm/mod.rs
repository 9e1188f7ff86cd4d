//! The GPU-driven communication runtime: who we are ([`world`]), how processes find each other
//! ([`bootstrap`], [`launch`]), symmetric NVLink buffers ([`symm`]), the GPU -> CPU command FIFO
//! ([`fifo`]), the CPU proxy that drains it ([`proxy`]) into a [`transport`], and the
//! [`communicator`] that owns them and that every op borrows (its symmetric heap: [`heap`]).
mod error;

pub mod bootstrap;
pub mod command;
pub mod communicator;
pub mod fifo;
pub mod heap;
pub mod launch;
pub mod proxy;
mod signals;
pub mod symm;
pub mod transport;
pub mod world;

pub use error::{CommError, CommResult};
