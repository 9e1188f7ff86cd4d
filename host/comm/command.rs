//! Decoding a FIFO command: the one place that says which 64-byte words are commands. Producers
//! check a command with [`decode`] before they claim a ticket (so a bad one never enters the
//! ring), and the proxy decodes every command it takes (so a bad one written by a GPU stops the
//! proxy with the ticket and the rule, instead of reaching a transport).
use crate::abi::{FifoCmd, OFFSET_BITS, OP_FENCE, OP_SIGNAL, OP_WRITE};

/// Largest offset + length a command can address: offsets are 48-bit.
pub const OFFSET_SPACE: u64 = 1 << OFFSET_BITS;

/// A well-formed command.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Copy `bytes` from local `src` to `dst` on `dst_rank`, then raise `flag` there.
    Write {
        /// Destination rank.
        dst_rank: u32,
        /// Source (buffer id, offset).
        src: (u64, u64),
        /// Destination (buffer id, offset).
        dst: (u64, u64),
        /// Length in bytes.
        bytes: u64,
    },
    /// Raise a flag on `dst_rank` (no data).
    Signal {
        /// Destination rank.
        dst_rank: u32,
    },
    /// Complete every earlier command before any later one starts.
    Fence,
}

/// Why a 64-byte word is not a command.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BadCommand {
    /// The opcode is not one of the known ones (0 marks an empty slot and is never a command).
    #[error("op {0} is not a command (1 write, 2 signal, 3 fence)")]
    UnknownOp(u64),
    /// A range runs past the 48-bit offset space (it would wrap around).
    #[error("{what} range {offset} + {bytes} bytes runs past the 2^48 offset space")]
    Overflow {
        /// `src` or `dst`.
        what: &'static str,
        /// The range's offset.
        offset: u64,
        /// Its length.
        bytes: u64,
    },
}

fn range(what: &'static str, loc: u64, bytes: u64) -> Result<(u64, u64), BadCommand> {
    let (id, offset) = FifoCmd::split(loc);
    match offset.checked_add(bytes) {
        Some(end) if end <= OFFSET_SPACE => Ok((id, offset)),
        _ => Err(BadCommand::Overflow { what, offset, bytes }),
    }
}

/// Decode `c` (its ticket bits are ignored), or the rule it breaks.
pub fn decode(c: &FifoCmd) -> Result<Command, BadCommand> {
    let dst_rank = c.dst_rank();
    match c.op() {
        OP_WRITE => Ok(Command::Write {
            dst_rank,
            src: range("src", c.src, c.bytes)?,
            dst: range("dst", c.dst, c.bytes)?,
            bytes: c.bytes,
        }),
        OP_SIGNAL => Ok(Command::Signal { dst_rank }),
        OP_FENCE => Ok(Command::Fence),
        op => Err(BadCommand::UnknownOp(op)),
    }
}
