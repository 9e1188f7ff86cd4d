//! Who this process is: torchrun-style variables (RANK, WORLD_SIZE, LOCAL_RANK,
//! LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT) plus mkernel's MKERNEL_NODES (node count, checked)
//! and MKERNEL_DEVICE (GPU ordinal; default LOCAL_RANK). Ranks are node-major: node `n` holds
//! ranks `n * LOCAL_WORLD_SIZE ..`.
use super::error::{CommError, CommResult};

/// Largest `WORLD_SIZE`: a FIFO command names its destination rank in 16 bits.
pub const MAX_WORLD: u32 = 1 << 16;

/// One process's place in the process group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct World {
    /// This process's rank (`RANK`), in `0..world_size`.
    pub rank: u32,
    /// Processes in the group (`WORLD_SIZE`).
    pub world_size: u32,
    /// Rank within this node (`LOCAL_RANK`); always `rank % local_world_size`.
    pub local_rank: u32,
    /// Ranks per node (`LOCAL_WORLD_SIZE`, default `WORLD_SIZE`); divides `world_size`.
    pub local_world_size: u32,
    /// This rank's node, `rank / local_world_size`.
    pub node: u32,
    /// Node count, `world_size / local_world_size`.
    pub nodes: u32,
    /// CUDA ordinal of this rank's GPU.
    pub device: u32,
    /// Where rank 0 runs the bootstrap (`MASTER_ADDR`, default 127.0.0.1).
    pub master_addr: String,
    /// Rank 0's bootstrap port (`MASTER_PORT`; needed when `world_size > 1`).
    pub master_port: u16,
}

impl World {
    /// Rank `rank` of `world_size` ranks on `nodes` nodes of equal size, GPU 0, no bootstrap
    /// address: a place in a group for the ops' planning tests.
    #[cfg(test)]
    pub(crate) fn test(rank: u32, world_size: u32, nodes: u32) -> World {
        let lw = world_size / nodes;
        World {
            rank,
            world_size,
            local_rank: rank % lw,
            local_world_size: lw,
            node: rank / lw,
            nodes,
            ..World::single(0)
        }
    }

    /// Read the process group from the environment.
    pub fn from_env() -> CommResult<World> {
        Self::from_vars(|k| std::env::var(k).ok())
    }

    /// Read the process group from `get` (the environment, or a map in tests), checking every rule.
    pub fn from_vars(get: impl Fn(&str) -> Option<String>) -> CommResult<World> {
        fn num<T: std::str::FromStr>(
            get: &impl Fn(&str) -> Option<String>,
            var: &'static str,
            default: Option<T>,
        ) -> CommResult<T> {
            match get(var) {
                Some(v) => v.trim().parse().map_err(|_| CommError::Env {
                    var,
                    rule: format!("`{}` is not a whole number >= 0", super::bootstrap::frame::clip(&v, 32)),
                }),
                None => {
                    default.ok_or(CommError::Env { var, rule: "must be set (torchrun-style process group)".into() })
                }
            }
        }
        let world_size: u32 = num(&get, "WORLD_SIZE", None)?;
        let rank: u32 = num(&get, "RANK", None)?;
        let local_world_size: u32 = num(&get, "LOCAL_WORLD_SIZE", Some(world_size))?;
        let local_rank: u32 = num(&get, "LOCAL_RANK", Some(rank % local_world_size.max(1)))?;
        let env = |var, rule: String| Err(CommError::Env { var, rule });
        if world_size == 0 || world_size > MAX_WORLD {
            return env(
                "WORLD_SIZE",
                format!("{world_size} must be in 1..={MAX_WORLD} (FIFO commands carry 16-bit ranks)"),
            );
        }
        if rank >= world_size {
            return env("RANK", format!("{rank} must be below WORLD_SIZE {world_size}"));
        }
        if local_world_size == 0 || !world_size.is_multiple_of(local_world_size) {
            return env("LOCAL_WORLD_SIZE", format!("{local_world_size} must divide WORLD_SIZE {world_size}"));
        }
        if local_rank != rank % local_world_size {
            return env(
                "LOCAL_RANK",
                format!(
                    "{local_rank} must be RANK % LOCAL_WORLD_SIZE = {} (ranks are node-major)",
                    rank % local_world_size
                ),
            );
        }
        let nodes = world_size / local_world_size;
        if let Some(n) = get("MKERNEL_NODES") {
            if n.trim().parse::<u32>().ok() != Some(nodes) {
                return env("MKERNEL_NODES", format!("`{n}` must equal WORLD_SIZE / LOCAL_WORLD_SIZE = {nodes}"));
            }
        }
        let device = num(&get, "MKERNEL_DEVICE", Some(local_rank))?;
        let master_addr = get("MASTER_ADDR").unwrap_or_else(|| "127.0.0.1".into());
        let master_port: u64 = num(&get, "MASTER_PORT", if world_size == 1 { Some(0) } else { None })?;
        // Port 0 would make rank 0 listen on a random port nobody else knows.
        let ports = if world_size == 1 { 0..=65535 } else { 1..=65535 };
        if !ports.contains(&master_port) {
            return env(
                "MASTER_PORT",
                format!("{master_port} must be a TCP port in {ports:?} when WORLD_SIZE is {world_size}"),
            );
        }
        let master_port = master_port as u16;
        Ok(World {
            rank,
            world_size,
            local_rank,
            local_world_size,
            node: rank / local_world_size,
            nodes,
            device,
            master_addr,
            master_port,
        })
    }

    /// A world of one process.
    pub fn single(device: u32) -> World {
        World {
            rank: 0,
            world_size: 1,
            local_rank: 0,
            local_world_size: 1,
            node: 0,
            nodes: 1,
            device,
            master_addr: "127.0.0.1".into(),
            master_port: 0,
        }
    }

    /// Node of `rank`.
    pub fn node_of(&self, rank: u32) -> u32 {
        rank / self.local_world_size
    }

    /// True when `rank` is on this node (reachable over NVLink).
    pub fn is_local(&self, rank: u32) -> bool {
        self.node_of(rank) == self.node
    }

    /// Global rank of local rank `lr` on this node.
    pub fn local_to_global(&self, lr: u32) -> u32 {
        self.node * self.local_world_size + lr
    }
}
