//! One module per op. Each validates its arguments (typed errors naming the argument and the
//! rule, before anything launches), plans the launch (tensor maps, role split), takes its
//! workspace (the communicator's symmetric heap for anything peers write), launches, and keeps
//! an unfused reference path where it fuses communication.
pub mod ag_gemm;
pub mod allgather;
pub mod gemm;
pub mod tuned;
