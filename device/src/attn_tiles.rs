//! The flash-attention kernels' tile order and masks as pure integer logic (host-testable, one
//! definition for the GPU and the tests): which (batch, head, query block) the `i`-th tile is,
//! which key blocks a tile sees and from which block on some row's keys must be masked (every
//! row sees a prefix of the key rows: positions only grow), the tensor-map coordinates, and the
//! units a ticket counter hands out.
use crate::abi::{AttnParams, SeqPos, ATTN_BSHD};
use crate::kernels_info::attention::{block_m, BLOCK_N};
use crate::sched::{div_nz, rem_nz};

/// One tile of work: query rows `mb * block_m ..` of head `h` of batch entry `b`.
#[derive(Clone, Copy)]
pub struct Work {
    /// Query block.
    pub mb: u32,
    /// Query head.
    pub h: u32,
    /// Batch entry.
    pub b: u32,
}

/// The problem's shape as the kernel walks it: tile order, visible key blocks, masks and tensor
/// coordinates. Pure integer logic shared by the producer and the consumers.
#[derive(Clone, Copy)]
pub struct Geometry {
    block_m: u32,
    heads: u32,
    group: u32,
    batch: u32,
    seq_q: u32,
    seq_k: u32,
    m_blocks: u32,
    bshd: bool,
    causal: bool,
    q_pos: SeqPos,
    k_pos: SeqPos,
}

impl Geometry {
    /// The geometry of the launch `p` with head dimension `d` (which sets the tile height).
    #[inline(always)]
    pub fn new(p: &AttnParams, d: u32) -> Self {
        let block_m = block_m(d);
        Self {
            block_m,
            heads: p.heads,
            // `max(1)`: the host checked both are at least 1; saying so keeps a panic (a call,
            // which costs the consumers registers) out of the kernel.
            group: p.heads / p.heads_kv.max(1),
            batch: p.batch,
            seq_q: p.seq_q,
            seq_k: p.seq_k,
            m_blocks: p.seq_q.div_ceil(block_m).max(1),
            bshd: p.layout == ATTN_BSHD,
            causal: p.causal != 0,
            q_pos: p.q_pos,
            k_pos: p.k_pos,
        }
    }

    /// This geometry with the key positions of a ring step.
    #[inline(always)]
    pub const fn with_keys(mut self, k_pos: SeqPos) -> Self {
        self.k_pos = k_pos;
        self
    }

    /// Query heads.
    #[inline(always)]
    pub const fn heads(&self) -> u32 {
        self.heads
    }

    /// Query rows.
    #[inline(always)]
    pub const fn seq_q(&self) -> u32 {
        self.seq_q
    }

    /// Tiles of the launch.
    #[inline(always)]
    pub const fn tiles(&self) -> u32 {
        self.m_blocks * self.heads * self.batch
    }

    /// Tile `i`: (batch, head) pairs in turn, each one's query blocks last first. CTAs running
    /// at the same time then share a head's keys and values in L2 (each pair's K and V are read
    /// once from memory, not once per CTA), and under a causal mask a head's longest tiles start
    /// first.
    #[inline(always)]
    pub const fn work(&self, i: u32) -> Work {
        let pair = i / self.m_blocks;
        let mb = self.m_blocks - 1 - i % self.m_blocks;
        let heads = if self.heads == 0 { 1 } else { self.heads };
        Work { mb, h: pair % heads, b: pair / heads }
    }

    /// The key/value head query head `h` reads.
    #[inline(always)]
    pub const fn kv_head(&self, h: u32) -> u32 {
        h / if self.group == 0 { 1 } else { self.group }
    }

    /// Keys row `row` sees: the prefix `0 .. visible_keys(row)` of the key rows (all `seq_k`, or
    /// under a causal mask those at or before the row's position; positions only grow).
    #[inline(always)]
    pub const fn visible_keys(&self, row: u32) -> u32 {
        if self.causal {
            self.k_pos.rows_at_or_before(self.q_pos.at(row), self.seq_k)
        } else {
            self.seq_k
        }
    }

    /// Key blocks query block `mb` sees: those holding a key its last real row sees.
    #[inline(always)]
    pub const fn kv_blocks(&self, mb: u32) -> u32 {
        let last_row = min_u32(mb * self.block_m + self.block_m, self.seq_q) - 1;
        self.visible_keys(last_row).div_ceil(BLOCK_N)
    }

    /// The first key block of query block `mb` holding a key some row does not see: every block
    /// before it is visible to all the rows (the first row sees the fewest keys).
    #[inline(always)]
    pub const fn first_masked_block(&self, mb: u32) -> u32 {
        self.visible_keys(mb * self.block_m) / BLOCK_N
    }

    /// Tensor-map coordinates of element `d` of row `row` of head `head` of batch entry `b`.
    #[inline(always)]
    pub const fn coords(&self, d: u32, head: u32, row: u32, b: u32) -> [i32; 4] {
        if self.bshd {
            [d as i32, head as i32, row as i32, b as i32]
        } else {
            [d as i32, row as i32, head as i32, b as i32]
        }
    }
}

#[inline(always)]
const fn min_u32(a: u32, b: u32) -> u32 {
    if a < b {
        a
    } else {
        b
    }
}

/// Units of work. A ring's launch has `steps` steps, each over every tile. The first `split`
/// tiles are walked one step per unit, step by step (unit `u < steps * split` is tile
/// `u % split` of step `u / split`); each of the other tiles is one unit over all the steps,
/// so it keeps its running output in registers and never merges (unit `steps * split + i` is
/// tile `split + i`). The split part comes first: it covers the time the later steps' K/V takes
/// to arrive, so a whole unit, which reads every step, rarely waits. A plain attention has one
/// step (split or not, the same). CTAs claim units in order from a ticket counter (the next
/// free unit goes to whichever CTA is free first, so units of unequal length balance out); a
/// ticket past the last unit is [`Units::END`].
#[derive(Clone, Copy)]
pub struct Units {
    /// Steps of the launch.
    pub steps: u32,
    /// Tiles walked one step per unit (at most `tiles`).
    pub split: u32,
    /// Units of the launch (`steps * split + tiles - split`).
    pub total: u32,
}

/// What one unit covers: steps `first .. end` of tile `tile`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Span {
    /// The tile.
    pub tile: u32,
    /// Its first step.
    pub first: u32,
    /// One past its last step.
    pub end: u32,
}

impl Units {
    /// What the producer hands the consumers when no work is left.
    pub const END: u32 = u32::MAX;

    /// The units of `steps` steps over `tiles` tiles, the first `split` of them (at most all)
    /// walked step by step.
    #[inline(always)]
    pub const fn new(tiles: u32, steps: u32, split: u32) -> Self {
        let split = min_u32(split, tiles);
        Self { steps, split, total: steps * split + (tiles - split) }
    }

    /// What unit `u` (below `total`) covers.
    #[inline(always)]
    pub const fn span(&self, u: u32) -> Span {
        let stepped = self.steps * self.split;
        if u < stepped {
            // `u < steps * split`: `split` is nonzero here.
            let step = div_nz(u, self.split);
            Span { tile: rem_nz(u, self.split), first: step, end: step + 1 }
        } else {
            Span { tile: self.split + (u - stepped), first: 0, end: self.steps }
        }
    }

    /// The unit behind ticket `ticket` of launch `epoch` for a grid of `ctas` claiming CTAs:
    /// every launch hands out `total + ctas` tickets (each CTA's last one is past the end).
    #[inline(always)]
    pub const fn of_ticket(&self, ticket: u32, epoch: u32, ctas: u32) -> u32 {
        let u = ticket.wrapping_sub(epoch.wrapping_sub(1).wrapping_mul(self.total + ctas));
        if u < self.total {
            u
        } else {
            Self::END
        }
    }
}
