//! Tile schedulers and CTA roles (pure integer logic, host-testable).
//!
//! A [`TileScheduler`] says which output tile comes `i`-th, an [`InputGate`] what a tile must wait
//! for before its loads; the engine's persistent CTAs take positions `cta, cta + ctas, ...`. One definition
//! of tile order serves every role: compute CTAs, and communication roles that need to know which
//! tile a peer produces when, all ask the same scheduler.
use crate::abi::RoleSplit;

/// `a / b` for a `b` the caller guarantees non-zero: no panic path, which on the device would
/// put a call inside the wgmma pipeline and make ptxas serialise it.
#[inline(always)]
pub const fn div_nz(a: u32, b: u32) -> u32 {
    // SAFETY: every caller passes a divisor that is non-zero by construction (documented there).
    unsafe { core::hint::assert_unchecked(b != 0) };
    a / b
}

/// `a % b` for a non-zero `b` (see [`div_nz`]).
#[inline(always)]
pub const fn rem_nz(a: u32, b: u32) -> u32 {
    // SAFETY: as for div_nz.
    unsafe { core::hint::assert_unchecked(b != 0) };
    a % b
}

/// The `i`-th local rank after `local_rank` on a node of `local_world` (at least 1; wrapping):
/// the order in which a rank visits its node's peers, each rank starting from the next so that
/// the ranks spread over different peers at once. Every kernel's and host op's one place for it
/// (the all-gather kernel offsets `i` by where its places start and by its CTA).
#[inline(always)]
pub const fn next_peer(local_rank: u32, local_world: u32, i: u32) -> u32 {
    rem_nz(local_rank + i, local_world)
}

/// A grid of output tiles walked in grouped ("swizzled") raster order: `group_m` tile rows at a
/// time, column by column, so consecutive tiles share A rows and B columns in L2.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileGrid {
    /// Tile rows: `ceil(m / tile_m)`.
    pub m_tiles: u32,
    /// Tile columns: `ceil(n / tile_n)`.
    pub n_tiles: u32,
    /// Tile rows per group (at least 1, at most `m_tiles` where that is positive; the last group
    /// may be shorter).
    pub group_m: u32,
}

impl TileGrid {
    /// Tiles of `tile_m x tile_n` covering `m x n` (partial edge tiles included), walked in
    /// groups of `group_m` tile rows: 0 walks one row at a time, and a group taller than the
    /// grid is the grid (the same walk, and `group_m x n_tiles` then stays within the tile count
    /// instead of wrapping in 32 bits).
    #[inline(always)]
    pub const fn new(m: u32, n: u32, tile_m: u32, tile_n: u32, group_m: u32) -> Self {
        let m_tiles = m.div_ceil(tile_m);
        let group_m = if group_m == 0 {
            1
        } else if group_m > m_tiles && m_tiles > 0 {
            m_tiles
        } else {
            group_m
        };
        Self { m_tiles, n_tiles: n.div_ceil(tile_n), group_m }
    }

    /// Number of tiles.
    #[inline(always)]
    pub const fn count(&self) -> u32 {
        self.m_tiles * self.n_tiles
    }

    /// (tile row, tile column) of the `t`-th tile in schedule order.
    #[inline(always)]
    pub const fn coords(&self, t: u32) -> (u32, u32) {
        // group_m >= 1 (new), n_tiles >= 1 and rows >= 1 whenever t < count().
        let per_group = self.group_m * self.n_tiles;
        let group = div_nz(t, per_group);
        let first_m = group * self.group_m;
        let rows = if self.m_tiles - first_m < self.group_m { self.m_tiles - first_m } else { self.group_m };
        let in_group = rem_nz(t, per_group);
        (first_m + rem_nz(in_group, rows), div_nz(in_group, rows))
    }

    /// The position in schedule order of tile (`tm`, `tn`): the inverse of [`TileGrid::coords`].
    #[inline(always)]
    pub const fn index_of(&self, tm: u32, tn: u32) -> u32 {
        let group = div_nz(tm, self.group_m);
        let first_m = group * self.group_m;
        let rows = if self.m_tiles - first_m < self.group_m { self.m_tiles - first_m } else { self.group_m };
        group * self.group_m * self.n_tiles + tn * rows + (tm - first_m)
    }
}

/// One output tile: its position in the schedule and its tile coordinates.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tile {
    /// Position in schedule order.
    pub index: u32,
    /// Tile row (rows `m * TILE_M ..`).
    pub m: u32,
    /// Tile column.
    pub n: u32,
}

/// The order of a GEMM's output tiles.
pub trait TileScheduler {
    /// Number of tiles (work units: with split-K, several per output tile).
    fn count(&self) -> u32;
    /// The `index`-th tile (`index < count()`).
    fn tile(&self, index: u32) -> Tile;
    /// The k-blocks `kb0..kb1` of the `index`-th unit, of `k_blocks` in all: every one by
    /// default.
    #[inline(always)]
    fn k_range(&self, _index: u32, k_blocks: u32) -> (u32, u32) {
        (0, k_blocks)
    }
    /// Whether a unit may have no k-blocks at all (the engine then skips it: no loads, no
    /// epilogue). Constant, so schedulers that never do pay nothing.
    const MAY_BE_EMPTY: bool = false;
    /// Whether CTAs take schedule positions from a counter in global memory ([`Claimed`])
    /// instead of walking `first, first + ctas, ...`. Constant: static walks pay nothing.
    const DYNAMIC: bool = false;
    /// With [`TileScheduler::DYNAMIC`]: the counter pair (see [`Claimed`]), or null when this
    /// launch walks statically after all (each CTA `first, first + ctas, ...`, published through
    /// the same ring).
    #[inline(always)]
    fn counters(&self) -> *mut u32 {
        core::ptr::null_mut()
    }
    /// With [`TileScheduler::DYNAMIC`]: how many k-blocks before a tile's last load the
    /// producer draws its next position (0: at the tile boundary). Early, the draw's round trip
    /// to L2 overlaps the tile's last loads instead of delaying the next tile's first.
    #[inline(always)]
    fn claim_ahead(&self) -> u32 {
        0
    }
    /// A static walk that CTAs join late ([`TileIter::joined`]): `(switch, early)`, the
    /// position from which every walker shares the tiles, and the walkers that start alone
    /// (`early == 0`: none join, every walker from the start).
    #[inline(always)]
    fn static_join(&self) -> (u32, u32) {
        (u32::MAX, 0)
    }
}

/// A scheduler whose positions go to whichever CTA asks first: `counters[0]` is the next
/// position, `counters[1]` the CTAs done drawing (`gemm::feed`). Both are zero between launches
/// (the last CTA done puts them back), so launches of other kinds in between (a fused op's
/// communication alone) and CUDA-graph replays need nothing. Tiles then start in schedule order
/// however long earlier ones took, and CTAs that had other work first (a fused kernel's comm
/// CTAs, once their copies are out) join wherever the walk is.
#[derive(Clone, Copy, Debug)]
pub struct Claimed<S> {
    /// The order of the tiles.
    pub inner: S,
    /// Two `u32` in global memory, zero before the first launch; null: every CTA walks
    /// `first, first + ctas, ...` instead (a launch-time choice, the code being the same).
    pub counters: *mut u32,
    /// See [`TileScheduler::claim_ahead`].
    pub ahead: u32,
    /// With null `counters`: see [`TileScheduler::static_join`].
    pub join: (u32, u32),
}

impl<S: TileScheduler> TileScheduler for Claimed<S> {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.inner.count()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        self.inner.tile(index)
    }
    #[inline(always)]
    fn k_range(&self, index: u32, k_blocks: u32) -> (u32, u32) {
        self.inner.k_range(index, k_blocks)
    }
    const MAY_BE_EMPTY: bool = S::MAY_BE_EMPTY;
    const DYNAMIC: bool = true;
    #[inline(always)]
    fn counters(&self) -> *mut u32 {
        self.counters
    }
    #[inline(always)]
    fn claim_ahead(&self) -> u32 {
        self.ahead
    }
    #[inline(always)]
    fn static_join(&self) -> (u32, u32) {
        self.join
    }
}

/// How a split-K style scheduler cuts its tiles: the partial slot a unit fills, and how many
/// units a tile has (they fill its slots `0..arrivals`, in k order).
pub trait KSplit {
    /// Partial slots per output tile in the workspace.
    fn slots(&self) -> u32;
    /// (output tile in grouped order, slot) of unit `index`.
    fn unit(&self, index: u32) -> (u32, u32);
    /// Units of output tile `t`.
    fn arrivals(&self, t: u32) -> u32;
    /// Whether unit `index` is a whole tile, stored as it is (no partial to sum): only some of
    /// a [`TailSplit`]'s are.
    #[inline(always)]
    fn whole(&self, _index: u32) -> bool {
        false
    }
}

/// A bounded wait gave up (it already reported who waited for what).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GaveUp;

/// What a tile waits for before its loads (a fused kernel's arrival flags). Only the producer
/// thread holds it, apart from the scheduler the consumers hold too: every register counts next
/// to their accumulators.
pub trait InputGate {
    /// Producer thread, before a tile's first load: wait until its inputs are present. `Err`
    /// means the wait gave up and reported why; the launch has failed, and the caller carries on
    /// without waiting so that the kernel still ends.
    ///
    /// # Safety
    /// Whatever memory the gate polls is valid for the launch.
    unsafe fn wait(&self, tile: Tile) -> Result<(), GaveUp>;

    /// The tensor map the tile's A rows are loaded from, and the row coordinate of its first
    /// row there: by default `a_map` at the tile's own rows.
    #[inline(always)]
    fn a_source(&self, tile: Tile, a_map: u64, tile_m: u32) -> (u64, u32) {
        (a_map, tile.m * tile_m)
    }

    /// Whether the engine runs an A writer thread that stores some tiles' A stages out (see
    /// [`InputGate::a_copy`]). Constant: other kernels pay nothing.
    const WRITES_A: bool = false;

    /// With [`InputGate::WRITES_A`]: which of the tile's A k-blocks also go elsewhere once they
    /// have landed in shared memory, and where (AllGather + GEMM: the local shard into the
    /// gathered A, from the tiles that read it anyway, so no copy CTA reads it a second time).
    /// `None`: none.
    #[inline(always)]
    fn a_copy(&self, _tile: Tile, _tile_m: u32) -> Option<ACopy> {
        None
    }

    /// Whether the producer warpgroup's spare warps 1 and 2 ([`SIDE_THREADS`] from
    /// [`SIDE_THREAD`]) run [`InputGate::side`] beside the tiles, with the shared memory past the engine's layout
    /// (`Smem::side`; such launches have `kernels_info::gemm::SIDE_SMEM_BYTES`). Constant:
    /// other kernels pay nothing.
    const SIDE: bool = false;

    /// With [`InputGate::SIDE`]: side thread `t`'s work (of [`SIDE_THREADS`]), given their
    /// shared memory (AllGather + GEMM: a share of the shard's copies to the node's ranks). It
    /// may return at once.
    ///
    /// # Safety
    /// `smem` is `SIDE_SMEM_BYTES - side_off` bytes of this CTA's shared memory that nothing
    /// else uses.
    #[inline(always)]
    unsafe fn side(&self, _smem: u32, _t: u32) {}

    /// Added to B's row coordinate for this tile: which of several matrices stacked in B's
    /// tensor map the tile multiplies by (a grouped GEMM's expert); 0 by default.
    #[inline(always)]
    fn b_row0(&self, _tile: Tile) -> u32 {
        0
    }

    /// The launch epoch the producer thread stamps its tiles' claims and readiness under (the
    /// `trace` feature; 0, never traced, by default).
    #[inline(always)]
    fn trace_epoch(&self) -> u32 {
        0
    }

    /// Whether A's rows are gathered row by row ([`InputGate::a_row`]) by the producer
    /// warpgroup's 128 threads instead of loaded as boxes of the tensor map.
    const GATHER: bool = false;

    /// Whether the producer warpgroup keeps 56 registers a thread (the consumers 224) rather
    /// than 40 (232): for gathering producers whose row addresses spill at 40. Both splits fill
    /// the same 64,512 registers a CTA launches with.
    const WIDE_PRODUCER: bool = false;

    /// With [`InputGate::GATHER`]: the global address of row `r` (of `TILE_M`) of the tile's A,
    /// 16-byte aligned, or 0 for a row of zeros.
    ///
    /// # Safety
    /// As for [`InputGate::wait`]; called after it returned for this tile.
    #[inline(always)]
    unsafe fn a_row(&self, _tile: Tile, _r: u32) -> u64 {
        0
    }

    /// With [`InputGate::GATHER`]: an address that is always readable (what a row of zeros
    /// points its empty copies at), 16-byte aligned.
    #[inline(always)]
    fn a_any(&self) -> u64 {
        0
    }
}

/// The first of the producer warpgroup's threads that run [`InputGate::side`]: warps 1 and 2,
/// whose lane 0s only epilogues with helpers use otherwise.
pub const SIDE_THREAD: u32 = 32;
/// Threads that run [`InputGate::side`].
pub const SIDE_THREADS: u32 = 64;

/// Where an A writer stores a tile's A k-blocks ([`InputGate::a_copy`]): k-blocks `kb` with
/// `kb % stride == first` go to row `row` of the tensor map `map` (same boxes as A's). The tiles
/// of one tile row share the row's k-blocks out (`first` = the tile's column, `stride` = the
/// columns), so no tile writes much more than its share.
#[derive(Clone, Copy)]
pub struct ACopy {
    /// Device address of the destination tensor map.
    pub map: u64,
    /// Row coordinate of the tile's first row there.
    pub row: u32,
    /// The first k-block this tile writes.
    pub first: u32,
    /// Every `stride`-th k-block from `first` on.
    pub stride: u32,
}

/// Inputs always present (the plain GEMM).
pub struct NoGate;

impl InputGate for NoGate {
    #[inline(always)]
    unsafe fn wait(&self, _tile: Tile) -> Result<(), GaveUp> {
        Ok(())
    }

    #[inline(always)]
    fn trace_epoch(&self) -> u32 {
        crate::abi::trace::PLAIN_EPOCH
    }
}

/// Grouped raster order over the whole grid (the plain GEMM).
#[derive(Clone, Copy, Debug)]
pub struct GroupedRaster(pub TileGrid);

impl TileScheduler for GroupedRaster {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.0.count()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let (m, n) = self.0.coords(index);
        Tile { index, m, n }
    }
}

/// Grouped raster order over tile rows taken in the order of a table: `rows[p]` is the tile row
/// walked `p`-th (a fused kernel puts rows whose data is local first, then rows in the order their
/// data arrives). The last `tail_rows` table positions stand apart from the groups, walked one
/// row after another (each row's tiles together), so that a cut of the walk's last
/// `tail_rows x n_tiles` positions is exactly those rows (AllGather + GEMM's arrival tail).
#[derive(Clone, Copy, Debug)]
pub struct RowOrder {
    /// The grid, its rows being table positions.
    pub grid: TileGrid,
    /// `grid.m_tiles` tile rows, a permutation of `0..grid.m_tiles`.
    pub rows: *const u32,
    /// Table positions at the end walked row by row after the grouped rest (at most
    /// `grid.m_tiles`; 0: all grouped).
    pub tail_rows: u32,
}

impl RowOrder {
    /// (table position, tile column) of schedule position `index`.
    #[inline(always)]
    pub const fn coords(&self, index: u32) -> (u32, u32) {
        let head = self.grid.m_tiles - self.tail_rows;
        let head_tiles = head * self.grid.n_tiles;
        if index < head_tiles {
            TileGrid { m_tiles: head, ..self.grid }.coords(index)
        } else {
            // n_tiles >= 1 whenever a tail position exists.
            let t = index - head_tiles;
            (head + div_nz(t, self.grid.n_tiles), rem_nz(t, self.grid.n_tiles))
        }
    }
}

impl TileScheduler for RowOrder {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.grid.count()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let (p, n) = self.coords(index);
        // SAFETY: p < grid.m_tiles, and the table holds that many entries (the host checks it).
        let m = unsafe { *self.rows.add(p as usize) };
        Tile { index, m, n }
    }
}

/// A walk in rounds over `sends` blocks whose tiles go to other ranks and `collects` blocks
/// whose tiles wait for theirs, `per` tiles each (tile `i` being the same tile of every block):
/// the first `lead` rounds send (tile `i` of every send block), each later round `i` sends tile
/// `i` and collects tile `i - lead` of every collect block, and the last `lead` collect rounds
/// close the walk. A collected tile thus comes `lead` rounds after the same tile's sends, on
/// every rank that walks the same shape, while the sends and the traffic they make spread over
/// the whole walk instead of crowding into its first part (`lead = per` sends everything first).
///
/// Walked by persistent CTAs at a fixed stride (`stride`, 0: none), the slots of a mixed round
/// turn by one per wave: with a stride that is a multiple of the round's width, a CTA would
/// otherwise meet the same slot in every round and a few CTAs would take every collect. Only with
/// a lead: with none, a round's collects share it with the sends of the same tile and must stay
/// its last slots.
#[derive(Clone, Copy, Debug)]
pub struct Rounds {
    /// Blocks sent per round.
    pub sends: u32,
    /// Blocks collected per round.
    pub collects: u32,
    /// Tiles per block.
    pub per: u32,
    /// Rounds of sends before the first collect (at most `per`).
    pub lead: u32,
    /// The walkers' stride, for turning the slots of mixed rounds (0: no turning).
    pub stride: u32,
}

/// What a [`Rounds`] walk does at a position.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RoundSlot {
    /// A collect (else a send).
    pub collect: bool,
    /// Which of the round's send or collect blocks.
    pub member: u32,
    /// The tile within the block.
    pub tile: u32,
}

impl Rounds {
    /// The walk; `lead` is capped at `per`, and `stride` applies only with a lead.
    #[inline(always)]
    pub const fn new(sends: u32, collects: u32, per: u32, lead: u32, stride: u32) -> Self {
        let lead = if lead < per { lead } else { per };
        Self { sends, collects, per, lead, stride: if lead == 0 { 0 } else { stride } }
    }

    /// Positions in the walk.
    #[inline(always)]
    pub const fn count(&self) -> u32 {
        (self.sends + self.collects) * self.per
    }

    /// The slot at position `index < count()`.
    #[inline(always)]
    pub const fn at(&self, index: u32) -> RoundSlot {
        let (s, c) = (self.sends, self.collects);
        let head = self.lead * s;
        if index < head {
            return RoundSlot { collect: false, member: rem_nz(index, s), tile: div_nz(index, s) };
        }
        let x = index - head;
        let width = s + c;
        let mixed = (self.per - self.lead) * width;
        if x >= mixed {
            let y = x - mixed;
            return RoundSlot { collect: true, member: rem_nz(y, c), tile: self.per - self.lead + div_nz(y, c) };
        }
        let round = div_nz(x, width);
        // One turn per wave, the same for the whole round (so it stays a permutation).
        let turn = if self.stride == 0 { 0 } else { rem_nz(div_nz(round * width, self.stride), width) };
        let o = wrap(rem_nz(x, width) + turn, width);
        if o < s {
            RoundSlot { collect: false, member: o, tile: self.lead + round }
        } else {
            RoundSlot { collect: true, member: o - s, tile: round }
        }
    }
}

/// The output of a GEMM whose rows are split into `world` blocks of `rows` rows, one per owner
/// rank (reduce-scatter): each block is tiled on its own, so no tile spans two owners, and a
/// tile's `m` is `owner * m_tiles + tile row within the block`.
///
/// The walk is a [`Rounds`] walk over the blocks' tiles in grouped order (local index `i` is the
/// same tile of every block): the sends are local tile `i` of the blocks of ranks `rank + 1`,
/// `rank + 2`, ... (every rank sends to a different owner at a time), the collect this rank's own
/// tile, which waits for the others' partials of it. With a lead the slots turn per wave of the
/// walkers ([`OwnerTiles::rotated`]): at world 4, 132 CTAs would otherwise leave every own tile
/// (its pulls and sums) to a quarter of them.
#[derive(Clone, Copy, Debug)]
pub struct OwnerTiles {
    /// Rows per owner block.
    pub rows: u32,
    /// Tile rows per owner block.
    pub m_tiles: u32,
    /// Tile columns.
    pub n_tiles: u32,
    /// Grouped raster within a block.
    pub group_m: u32,
    /// Owners (ranks).
    pub world: u32,
    /// This rank.
    pub rank: u32,
    /// Rounds of sends before the first own tile (at most `per_owner()`).
    pub lead: u32,
    /// The walkers' stride (CTAs), for turning the round slots ([`Rounds::stride`]); 0: no
    /// turning.
    pub stride: u32,
}

/// Where an [`OwnerTiles`] tile sits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnedTile {
    /// Rank whose block holds it.
    pub owner: u32,
    /// Tile row within the owner's block.
    pub tm: u32,
    /// Tile column.
    pub tn: u32,
    /// Index of the tile within its owner's block (`tm * n_tiles + tn`): the same on every rank,
    /// whatever the walking order, so it names staging slots and flags.
    pub slot: u32,
}

impl OwnerTiles {
    /// `world` blocks of `rows` rows by `n` columns in `tile_m x tile_n` tiles, walked with
    /// `lead` rounds of sends first.
    #[inline(always)]
    pub const fn new(
        rows: u32,
        n: u32,
        (tile_m, tile_n): (u32, u32),
        group_m: u32,
        world: u32,
        rank: u32,
        lead: u32,
    ) -> Self {
        let (m_tiles, n_tiles) = (rows.div_ceil(tile_m), n.div_ceil(tile_n));
        let per = m_tiles * n_tiles;
        Self {
            rows,
            m_tiles,
            n_tiles,
            group_m: if group_m == 0 { 1 } else { group_m },
            world,
            rank,
            lead: if lead < per { lead } else { per },
            stride: 0,
        }
    }

    /// The same walk with the slots of the rounds after the first `lead` turned by one per wave
    /// of `ctas` walkers (see the type's docs; [`Rounds::new`] turns nothing without a lead).
    #[inline(always)]
    pub const fn rotated(self, ctas: u32) -> Self {
        Self { stride: ctas, ..self }
    }

    /// The owner and the local index (grouped order within the owner's block) of the tile at
    /// walk position `index` (see the type's docs).
    #[inline(always)]
    pub const fn order(&self, index: u32) -> (u32, u32) {
        let others = self.world - 1;
        let at = Rounds::new(others, 1, self.per_owner(), self.lead, self.stride).at(index);
        if at.collect {
            (self.rank, at.tile)
        } else {
            (rem_nz(self.rank + 1 + at.member, self.world), at.tile)
        }
    }

    /// Tiles per owner block.
    #[inline(always)]
    pub const fn per_owner(&self) -> u32 {
        self.m_tiles * self.n_tiles
    }

    /// The owner, block-local tile coordinates and slot of tile `m` / `n` (a [`Tile`]'s fields).
    #[inline(always)]
    pub const fn locate(&self, m: u32, n: u32) -> OwnedTile {
        let owner = div_nz(m, self.m_tiles);
        let tm = m - owner * self.m_tiles;
        OwnedTile { owner, tm, tn: n, slot: tm * self.n_tiles + n }
    }
}

impl TileScheduler for OwnerTiles {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.world * self.per_owner()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let (owner, local) = self.order(index);
        let grid = TileGrid { m_tiles: self.m_tiles, n_tiles: self.n_tiles, group_m: self.group_m };
        let (tm, tn) = grid.coords(local);
        Tile { index, m: owner * self.m_tiles + tm, n: tn }
    }
}

/// Where a rank sits in a world of `nodes` nodes of `local_world` ranks each (node-major: rank
/// `r` is local rank `r % local_world` of node `r / local_world`), and the hierarchical
/// reduce's roles that follow from it. Block `q` (the rows rank `q` owns) is *collected* on
/// every node by the rank with `q`'s local index: the node's other ranks hand it their partials
/// of `q` over NVLink, and it sums them into the node's partial of `q` (a "node partial"), which
/// crosses the inter-node link once per node. The blocks a rank collects are the `nodes` blocks
/// of its local index, one per node: block `qi * local_world + local_rank` is its `qi`-th.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NodeMap {
    /// This rank.
    pub rank: u32,
    /// Ranks per node (at least 1).
    pub local_world: u32,
    /// Nodes (at least 1).
    pub nodes: u32,
    node: u32,
    local_rank: u32,
}

/// `x mod n` for `x < 2n` (a sum of two indices below `n`), without a division.
#[inline(always)]
const fn wrap(x: u32, n: u32) -> u32 {
    if x >= n {
        x - n
    } else {
        x
    }
}

impl NodeMap {
    /// Rank `rank` of `nodes` nodes of `local_world` ranks.
    #[inline(always)]
    pub const fn new(rank: u32, local_world: u32, nodes: u32) -> Self {
        Self { rank, local_world, nodes, node: div_nz(rank, local_world), local_rank: rem_nz(rank, local_world) }
    }
    /// This rank's node.
    #[inline(always)]
    pub const fn node(&self) -> u32 {
        self.node
    }
    /// This rank's index on its node.
    #[inline(always)]
    pub const fn local_rank(&self) -> u32 {
        self.local_rank
    }
    /// The local rank (on this node) that collects block `q`: `q`'s local index.
    #[inline(always)]
    pub const fn collector(&self, q: u32) -> u32 {
        rem_nz(q, self.local_world)
    }
    /// Whether this rank collects block `q`.
    #[inline(always)]
    pub const fn collects(&self, q: u32) -> bool {
        self.collector(q) == self.local_rank()
    }
    /// The node of block `q`'s owner: `q`'s index among the blocks its collectors collect.
    #[inline(always)]
    pub const fn block_node(&self, q: u32) -> u32 {
        div_nz(q, self.local_world)
    }
    /// The rank on node `m` with this rank's local index (its counterpart there; itself for its
    /// own node): the rank that collects the same blocks on node `m`.
    #[inline(always)]
    pub const fn pair(&self, m: u32) -> u32 {
        m * self.local_world + self.local_rank()
    }
    /// The `b`-th (0..nodes) of the blocks this rank collects, in the order it walks them: the
    /// blocks of the other nodes first (the nodes after this one, in turn), its own last.
    /// Returns the block's node index `qi`; the block is [`NodeMap::pair`]`(qi)`.
    #[inline(always)]
    pub const fn collected_node(&self, b: u32) -> u32 {
        wrap(self.node + 1 + b, self.nodes)
    }
    /// The `b`-th (0..finals) block this rank finalises, as a node index `qi`: its own node's
    /// first, then the others in [`NodeMap::collected_node`]'s order. That is the order the
    /// other nodes' partials arrive in (each pair sends the blocks of the nodes after its own
    /// first, so this node's block comes first from the next node), and finalising a block whose
    /// partials are all in never waits behind one whose partials are still on the wire.
    #[inline(always)]
    pub const fn finalised_node(&self, b: u32) -> u32 {
        wrap(self.node + b, self.nodes)
    }
    /// How many ranks this rank's node partial of its `qi`-th collected block goes to:
    /// reduce-scatter, the block's owner (none for its own block); all-reduce, the block's
    /// collector on every other node.
    #[inline(always)]
    pub const fn dests(&self, qi: u32, all_reduce: bool) -> u32 {
        if all_reduce {
            self.nodes - 1
        } else if qi == self.node() {
            0
        } else {
            1
        }
    }
    /// The `k`-th of those ranks (`k < dests(qi, ..)`).
    #[inline(always)]
    pub const fn dest(&self, qi: u32, k: u32, all_reduce: bool) -> u32 {
        if all_reduce {
            self.pair(self.collected_node(k))
        } else {
            self.pair(qi)
        }
    }
    /// How many of its collected blocks, the first ones of [`NodeMap::collected_node`]'s order,
    /// this rank sends node partials of: all of them for the all-reduce, those of the other
    /// nodes for the reduce-scatter.
    #[inline(always)]
    pub const fn sent_blocks(&self, all_reduce: bool) -> u32 {
        if all_reduce {
            self.nodes
        } else {
            self.nodes - 1
        }
    }
    /// How many of its collected blocks this rank finalises (sums every node's partial of), in
    /// [`NodeMap::finalised_node`]'s order: all for the all-reduce, its own for the
    /// reduce-scatter.
    #[inline(always)]
    pub const fn finals(&self, all_reduce: bool) -> u32 {
        if all_reduce {
            self.nodes
        } else {
            1
        }
    }
}

/// The walk of a GEMM + ReduceScatter / AllReduce over several nodes: the [`OwnerTiles`]
/// blocks (`blocks` gives their geometry; its `lead` is unused) in four classes:
/// 1. blocks of other nodes collected by another rank of this node: partials over NVLink to
///    that rank, which must then sum and send them on (the longest path);
/// 2. blocks of other nodes this rank collects: sum the node's partials (sent by the others in
///    class 1) into a node partial for the inter-node link;
/// 3. blocks of this node's other ranks: partials over NVLink to their owner;
/// 4. this rank's own block (its node's partials sent in class 3).
///
/// Two [`Rounds`] walks, one after the other, each with `lead` rounds of sends first: classes 1
/// (sends) and 2 (collects), then classes 3 and 4. So node partials leave from the first waves
/// on, and the inter-node link, the slowest path, is busy from early in the launch instead of
/// from the end of class 1 (measured on 2 emulated nodes x 2 before the rounds: the first WRITE
/// waited for a quarter of the walk). Every rank of a node walks the same class sizes, so a tile
/// a rank collects comes, in its walk, after every position at which the node's other ranks send
/// it their partials (`lead` rounds after, or later in the same round without a lead), and no
/// wait can close a cycle. `lead = per` is the classes one after the other; one node is
/// classes 3 and 4 alone, which is [`OwnerTiles`] with the same lead.
#[derive(Clone, Copy, Debug)]
pub struct NodeTiles {
    /// The blocks' geometry (and `locate`).
    pub blocks: OwnerTiles,
    /// Where this rank sits.
    pub map: NodeMap,
    /// Rounds of sends before the first collect, in each of the two walks (at most a block's
    /// tiles).
    pub lead: u32,
    /// The walkers' stride ([`Rounds::stride`]).
    pub stride: u32,
}

impl NodeTiles {
    /// The walk of rank `rank` of `world` ranks in nodes of `local_world` (which divides `world`),
    /// `lead` rounds of sends first in each half.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    pub const fn new(
        rows: u32,
        n: u32,
        tile: (u32, u32),
        group_m: u32,
        world: u32,
        rank: u32,
        local_world: u32,
        lead: u32,
    ) -> Self {
        let blocks = OwnerTiles::new(rows, n, tile, group_m, world, rank, 0);
        let per = blocks.per_owner();
        // Capped once here rather than by `Rounds::new` at every position.
        let lead = if lead < per { lead } else { per };
        Self { blocks, map: NodeMap::new(rank, local_world, div_nz(world, local_world)), lead, stride: 0 }
    }

    /// The same walk with the slots of mixed rounds turned per wave of `ctas` walkers.
    #[inline(always)]
    pub const fn rotated(self, ctas: u32) -> Self {
        Self { stride: ctas, ..self }
    }

    /// Blocks in each class, in walk order.
    #[inline(always)]
    pub const fn class_sizes(&self) -> [u32; 4] {
        let (l, n) = (self.map.local_world, self.map.nodes);
        [(n - 1) * (l - 1), n - 1, l - 1, 1]
    }

    /// The two halves: classes 1 and 2 (other nodes' blocks), then 3 and 4 (this node's).
    #[inline(always)]
    pub const fn halves(&self) -> [Rounds; 2] {
        let [s0, s1, s2, s3] = self.class_sizes();
        let per = self.blocks.per_owner();
        [Rounds::new(s0, s1, per, self.lead, self.stride), Rounds::new(s2, s3, per, self.lead, self.stride)]
    }

    /// Block `j` of class `c` (0-based classes, see the type's docs).
    #[inline(always)]
    const fn member(&self, c: u32, j: u32) -> u32 {
        let m = self.map;
        let (l, n, node, lr) = (m.local_world, m.nodes, m.node(), m.local_rank());
        match c {
            // j runs over the other local ranks fastest, then the other nodes.
            0 => wrap(node + 1 + div_nz(j, l - 1), n) * l + wrap(lr + 1 + rem_nz(j, l - 1), l),
            1 => m.pair(m.collected_node(j)),
            2 => node * l + wrap(lr + 1 + j, l),
            _ => m.rank,
        }
    }

    /// The block and its local tile index (grouped order within the block, the same on every
    /// rank) at walk position `index`.
    #[inline(always)]
    pub const fn walk(&self, index: u32) -> (u32, u32) {
        let [a, b] = self.halves();
        let (first, at) = if index < a.count() { (0, a.at(index)) } else { (2, b.at(index - a.count())) };
        (self.member(first + at.collect as u32, at.member), at.tile)
    }
}

impl TileScheduler for NodeTiles {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.blocks.count()
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let b = self.blocks;
        let (q, local) = self.walk(index);
        let grid = TileGrid { m_tiles: b.m_tiles, n_tiles: b.n_tiles, group_m: b.group_m };
        let (tm, tn) = grid.coords(local);
        Tile { index, m: q * b.m_tiles + tm, n: tn }
    }
}

/// Split-K over a grouped raster: each output tile's k-blocks are cut into `splits` contiguous
/// ranges, one work unit each. Unit `u` is split `u % splits` of the `u / splits`-th tile in
/// grouped order, so the units of one tile run side by side in the same wave and the last of them
/// to finish, which sums them (`gemm::epilogue::SplitKStore`), waits little.
#[derive(Clone, Copy, Debug)]
pub struct SplitK {
    /// The output tiles.
    pub grid: TileGrid,
    /// Units per output tile (at least 1, at most the k-blocks).
    pub splits: u32,
}

impl SplitK {
    /// (output tile in grouped order, split) of unit `index`.
    #[inline(always)]
    pub const fn unit(&self, index: u32) -> (u32, u32) {
        (div_nz(index, self.splits), rem_nz(index, self.splits))
    }

    /// The k-blocks of split `s` of `k_blocks`: as even as integers allow, never empty when
    /// `splits <= k_blocks`.
    #[inline(always)]
    pub const fn split_range(&self, s: u32, k_blocks: u32) -> (u32, u32) {
        (div_nz(s * k_blocks, self.splits), div_nz((s + 1) * k_blocks, self.splits))
    }
}

impl TileScheduler for SplitK {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.grid.count() * self.splits
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let (m, n) = self.grid.coords(self.unit(index).0);
        Tile { index, m, n }
    }
    #[inline(always)]
    fn k_range(&self, index: u32, k_blocks: u32) -> (u32, u32) {
        self.split_range(self.unit(index).1, k_blocks)
    }
}

impl KSplit for SplitK {
    #[inline(always)]
    fn slots(&self) -> u32 {
        self.splits
    }
    #[inline(always)]
    fn unit(&self, index: u32) -> (u32, u32) {
        SplitK::unit(self, index)
    }
    #[inline(always)]
    fn arrivals(&self, _t: u32) -> u32 {
        self.splits
    }
}

/// Stream-K over a grouped raster, for fewer tiles than CTAs but too many to split evenly (112
/// tiles on 132 SMs would leave 20 idle): the tiles' k-blocks, end to end, are cut into one
/// contiguous range of `len` per CTA, so every CTA does the same work. A range spans at most
/// two tiles (`len` <= the k-blocks of a tile when tiles <= CTAs): CTA `c` runs unit `c` (its
/// range's part in its first tile) and unit `c + ctas` (the part in the next tile, often
/// empty). A tile's units are those of consecutive CTAs, in k order.
#[derive(Clone, Copy, Debug)]
pub struct StreamK {
    /// The output tiles.
    pub grid: TileGrid,
    /// How many there are (`grid.count()`, or fewer when only a tail of another walk is cut:
    /// [`TailSplit`]).
    pub tiles: u32,
    /// k-blocks per tile.
    pub k_blocks: u32,
    /// CTAs (one range each).
    pub ctas: u32,
    /// k-blocks per CTA: `ceil(tiles x k_blocks / ctas)`.
    pub len: u32,
}

impl StreamK {
    /// `grid`'s tiles of `k_blocks` each over `ctas` CTAs (`grid.count() <= ctas`, and
    /// `grid.count() x k_blocks` below 2^32: the host checks).
    #[inline(always)]
    pub const fn new(grid: TileGrid, k_blocks: u32, ctas: u32) -> Self {
        Self::of(grid, grid.count(), k_blocks, ctas)
    }

    /// `tiles` tiles of `grid`'s shape (`tiles <= ctas`), the first `tiles` in its order or any
    /// `tiles` a caller maps them to.
    #[inline(always)]
    pub const fn of(grid: TileGrid, tiles: u32, k_blocks: u32, ctas: u32) -> Self {
        let total = tiles * k_blocks;
        Self { grid, tiles, k_blocks, ctas, len: div_nz(total + ctas - 1, ctas) }
    }

    /// (tile, first k-block, end k-block within the tile) of unit `u`; an empty range when the
    /// unit has no work.
    #[inline(always)]
    pub const fn segment(&self, u: u32) -> (u32, u32, u32) {
        let (c, k) = (rem_nz(u, self.ctas), div_nz(u, self.ctas));
        let total = self.tiles * self.k_blocks;
        let start = if c * self.len < total { c * self.len } else { total };
        let end = if start + self.len < total { start + self.len } else { total };
        if start >= end {
            return (0, 0, 0);
        }
        let t = div_nz(start, self.k_blocks) + k;
        let (t0, t1) = (t * self.k_blocks, (t + 1) * self.k_blocks);
        let lo = if start > t0 { start } else { t0 };
        let hi = if end < t1 { end } else { t1 };
        if lo >= hi {
            (0, 0, 0)
        } else {
            (t, lo - t0, hi - t0)
        }
    }

    /// The first CTA whose range reaches into tile `t`.
    #[inline(always)]
    const fn first_cta(&self, t: u32) -> u32 {
        div_nz(t * self.k_blocks, self.len)
    }
}

impl TileScheduler for StreamK {
    #[inline(always)]
    fn count(&self) -> u32 {
        2 * self.ctas
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let (m, n) = self.grid.coords(self.segment(index).0);
        Tile { index, m, n }
    }
    #[inline(always)]
    fn k_range(&self, index: u32, _k_blocks: u32) -> (u32, u32) {
        let (_, kb0, kb1) = self.segment(index);
        (kb0, kb1)
    }
    const MAY_BE_EMPTY: bool = true;
}

impl KSplit for StreamK {
    #[inline(always)]
    fn slots(&self) -> u32 {
        div_nz(self.k_blocks + self.len - 1, self.len) + 1
    }
    #[inline(always)]
    fn unit(&self, index: u32) -> (u32, u32) {
        let t = self.segment(index).0;
        (t, rem_nz(index, self.ctas) - self.first_cta(t))
    }
    #[inline(always)]
    fn arrivals(&self, t: u32) -> u32 {
        div_nz((t + 1) * self.k_blocks - 1, self.len) - self.first_cta(t) + 1
    }
}

/// Whole tiles, then a stream-K tail: positions `0..dp` are `inner`'s first `dp` tiles, whole
/// (data-parallel: `dp` a multiple of the walkers, so every walker has the same count); the
/// remaining `tail.tiles` tiles of `inner` (fewer than the walkers) are cut as [`StreamK`]
/// cuts them, one contiguous k-range per walker at positions `dp + c` and `dp + c + ctas`. A
/// last partial wave that would leave most CTAs idle (32 tiles on 126 CTAs: a 17th wave for
/// 16.25 waves of work) is then spread over all of them; the units of a tail tile sum their
/// partials (`gemm::epilogue::TailStore`).
#[derive(Clone, Copy, Debug)]
pub struct TailSplit<S> {
    /// The whole walk's order.
    pub inner: S,
    /// Positions taken whole.
    pub dp: u32,
    /// The tail's cut (its tile `t` is `inner`'s tile `dp + t`).
    pub tail: StreamK,
}

impl<S: TileScheduler> TailSplit<S> {
    /// `inner`'s tiles of `k_blocks` each over `ctas` walkers: whole while full waves remain
    /// (`dp` = the largest multiple of `ctas` not above `inner.count()`: a tail of fewer than
    /// `ctas` tiles), the rest stream-K. `split` false (or a tail of no tile): all whole. The
    /// waves are those of walkers that keep one stride from the start (not a walk joined late,
    /// `TileIter::joined`, whose stride changes on the way).
    #[inline(always)]
    pub fn new(inner: S, grid: TileGrid, k_blocks: u32, ctas: u32, split: bool) -> Self {
        let count = inner.count();
        let rem = rem_nz(count, ctas);
        let dp = if split && rem != 0 { count - rem } else { count };
        Self::at(inner, grid, k_blocks, ctas, dp)
    }

    /// As [`TailSplit::new`] with `dp` given (what `new` chose, kept by a kernel's parameters so
    /// that it need not be held in registers).
    #[inline(always)]
    pub fn at(inner: S, grid: TileGrid, k_blocks: u32, ctas: u32, dp: u32) -> Self {
        let tiles = inner.count() - dp;
        Self { inner, dp, tail: StreamK::of(grid, tiles, k_blocks, ctas) }
    }
}

impl<S: TileScheduler> TileScheduler for TailSplit<S> {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.dp + if self.tail.tiles != 0 { 2 * self.tail.ctas } else { 0 }
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        if index < self.dp {
            return self.inner.tile(index);
        }
        let t = self.inner.tile(self.dp + self.tail.segment(index - self.dp).0);
        Tile { index, ..t }
    }
    #[inline(always)]
    fn k_range(&self, index: u32, k_blocks: u32) -> (u32, u32) {
        if index < self.dp {
            return (0, k_blocks);
        }
        let (_, kb0, kb1) = self.tail.segment(index - self.dp);
        (kb0, kb1)
    }
    const MAY_BE_EMPTY: bool = true;
    const DYNAMIC: bool = S::DYNAMIC;
    #[inline(always)]
    fn counters(&self) -> *mut u32 {
        self.inner.counters()
    }
    #[inline(always)]
    fn claim_ahead(&self) -> u32 {
        self.inner.claim_ahead()
    }
    #[inline(always)]
    fn static_join(&self) -> (u32, u32) {
        self.inner.static_join()
    }
}

impl<S> KSplit for TailSplit<S> {
    #[inline(always)]
    fn slots(&self) -> u32 {
        if self.tail.tiles == 0 {
            1 // no tail (and no k-range length to divide by)
        } else {
            self.tail.slots()
        }
    }
    /// (tail tile, slot) of tail unit `index` (`index >= dp`).
    #[inline(always)]
    fn unit(&self, index: u32) -> (u32, u32) {
        self.tail.unit(index - self.dp)
    }
    #[inline(always)]
    fn arrivals(&self, t: u32) -> u32 {
        self.tail.arrivals(t)
    }
    #[inline(always)]
    fn whole(&self, index: u32) -> bool {
        index < self.dp
    }
}

/// A grouped GEMM's tiles over groups (experts) whose rows are stacked in one matrix, each
/// group starting at a multiple of the tile height, read from tables a router wrote (see
/// [`crate::abi::MoeScratch`]): group by group (the order their rows fill in), within a group
/// tile rows fastest, so CTAs that run at once share the group's B columns.
#[derive(Clone, Copy, Debug)]
pub struct GroupedTiles {
    /// `[groups + 1]` first row of each group (multiples of the tile height).
    pub group_off: *const u32,
    /// `[groups + 1]` prefix sums of tiles per group; the last entry is the tiles in all.
    pub tile_start: *const u32,
    /// Groups.
    pub groups: u32,
    /// Tile height.
    pub tile_m: u32,
}

impl GroupedTiles {
    #[inline(always)]
    fn at(p: *const u32, i: u32) -> u32 {
        // SAFETY: callers index within the tables' documented lengths.
        unsafe { *p.add(i as usize) }
    }

    /// The group of schedule position `j` (below the tiles in all): the last group whose first
    /// tile is at or before `j` (empty groups share a start).
    #[inline(always)]
    fn group_of(&self, j: u32) -> u32 {
        let (mut lo, mut hi) = (0u32, self.groups);
        while hi - lo > 1 {
            let mid = (lo + hi) / 2;
            if Self::at(self.tile_start, mid) <= j {
                lo = mid;
            } else {
                hi = mid;
            }
        }
        lo
    }
}

impl TileScheduler for GroupedTiles {
    #[inline(always)]
    fn count(&self) -> u32 {
        Self::at(self.tile_start, self.groups)
    }
    #[inline(always)]
    fn tile(&self, index: u32) -> Tile {
        let g = self.group_of(index);
        let q = index - Self::at(self.tile_start, g);
        let first_row = Self::at(self.group_off, g);
        // Non-zero: the group has tiles (q indexes one).
        let m_tiles = div_nz(Self::at(self.group_off, g + 1) - first_row, self.tile_m);
        Tile { index, m: div_nz(first_row, self.tile_m) + rem_nz(q, m_tiles), n: div_nz(q, m_tiles) }
    }
}

/// The tiles one persistent CTA owns: `first, first + stride, ...` below `end`; with a join
/// ([`TileIter::joined`]) the stride widens at position `switch`.
#[derive(Clone, Copy, Debug)]
pub struct TileIter {
    next: u32,
    stride: u32,
    end: u32,
    switch: u32,
    wide: u32,
}

impl TileIter {
    /// Schedule positions `first, first + stride, ...` below `end` (a CTA's index, the CTA count,
    /// the tile count).
    #[inline(always)]
    pub const fn new(first: u32, stride: u32, end: u32) -> Self {
        Self { next: first, stride, end, switch: u32::MAX, wide: stride }
    }

    /// The walk of walker `first` of `walkers` when only the first `early` walk from the start
    /// and the others join at position `switch` (a multiple of `early`): before it the early
    /// walkers share the positions at a stride of `early`, from it everyone at a stride of
    /// `walkers`, late walker `j` starting at `switch + early + j`. Every position below `end` is
    /// walked exactly once, and an early walker's positions still come in order, so a late
    /// walker that joins before the early ones reach `switch` changes no one's share. The
    /// caller keeps `switch + walkers` within `u32` (past `end` the join is moot).
    #[inline(always)]
    pub const fn joined(first: u32, early: u32, walkers: u32, end: u32, switch: u32) -> Self {
        if first < early {
            Self { next: first, stride: early, end, switch, wide: walkers }
        } else {
            Self { next: switch + first, stride: walkers, end, switch: 0, wide: walkers }
        }
    }
}

impl Iterator for TileIter {
    type Item = u32;
    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        if self.next < self.end {
            let t = self.next;
            self.next += if t < self.switch { self.stride } else { self.wide };
            Some(t)
        } else {
            None
        }
    }
}

/// What a CTA of a persistent kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum Role {
    /// Runs the GEMM engine over its share of the tiles.
    Compute = 0,
    /// Copies data to the other ranks of this node over NVLink.
    IntraComm = 1,
    /// Pushes commands into the proxy FIFO for ranks on other nodes.
    InterSend = 2,
    /// Reduces partials from other ranks: GEMM + ReduceScatter / AllReduce over several nodes
    /// adds the node partials there; the unfused reduce kernels report their waits under it.
    InterReduce = 3,
}

impl RoleSplit {
    /// Only compute CTAs (a plain GEMM).
    pub const fn compute_only(ctas: u32) -> Self {
        Self { compute: ctas, intra_comm: 0, inter_send: 0, inter_reduce: 0 }
    }

    /// Total CTAs of the grid.
    #[inline(always)]
    pub const fn total(&self) -> u32 {
        self.compute + self.intra_comm + self.inter_send + self.inter_reduce
    }

    /// Role of CTA `cta` and its index among the CTAs of that role; `None` past the grid.
    #[inline(always)]
    pub const fn role_of(&self, cta: u32) -> Option<(Role, u32)> {
        let mut c = cta;
        if c < self.compute {
            return Some((Role::Compute, c));
        }
        c -= self.compute;
        if c < self.intra_comm {
            return Some((Role::IntraComm, c));
        }
        c -= self.intra_comm;
        if c < self.inter_send {
            return Some((Role::InterSend, c));
        }
        c -= self.inter_send;
        if c < self.inter_reduce {
            return Some((Role::InterReduce, c));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec;

    #[test]
    fn grouped_order_visits_every_tile_once() {
        for &(m, n, g) in &[(1u32, 1u32, 8u32), (1000, 1544, 8), (8192, 8192, 8), (300, 7000, 3), (128, 256, 1)] {
            let grid = TileGrid::new(m, n, 128, 256, g);
            let mut seen = vec![false; grid.count() as usize];
            for t in 0..grid.count() {
                let (tm, tn) = grid.coords(t);
                assert!(tm < grid.m_tiles && tn < grid.n_tiles, "{m}x{n} g{g} t{t} -> ({tm},{tn})");
                let i = (tm * grid.n_tiles + tn) as usize;
                assert!(!seen[i], "{m}x{n} g{g}: tile ({tm},{tn}) twice");
                seen[i] = true;
            }
        }
    }

    #[test]
    fn grouped_order_stays_in_a_band_of_rows() {
        let grid = TileGrid::new(64 * 128, 16 * 256, 128, 256, 8);
        for t in 0..8 * 16 {
            assert!(grid.coords(t).0 < 8);
        }
        assert_eq!(grid.coords(0), (0, 0));
        assert_eq!(grid.coords(1), (1, 0));
        assert_eq!(grid.coords(8), (0, 1));
    }

    #[test]
    fn persistent_ctas_partition_the_tiles() {
        let total = 1000;
        let ctas = 132;
        let mut count = vec![0u8; total as usize];
        for c in 0..ctas {
            for t in TileIter::new(c, ctas, total) {
                count[t as usize] += 1;
            }
        }
        assert!(count.iter().all(|&c| c == 1));
    }

    #[test]
    fn row_order_permutes_rows_and_keeps_columns() {
        let rows = [2u32, 0, 1];
        let s = RowOrder { grid: TileGrid::new(3 * 128, 2 * 256, 128, 256, 2), rows: rows.as_ptr(), tail_rows: 0 };
        let mut seen = [false; 6];
        for i in 0..s.count() {
            let t = s.tile(i);
            assert_eq!(t.index, i);
            seen[(t.m * 2 + t.n) as usize] = true;
        }
        assert!(seen.iter().all(|&x| x));
        // Position 0 of the table (tile row 2) comes first.
        assert_eq!(s.tile(0), Tile { index: 0, m: 2, n: 0 });
        assert_eq!(s.tile(1), Tile { index: 1, m: 0, n: 0 });
        let g = GroupedRaster(TileGrid::new(128, 256, 128, 256, 8));
        assert_eq!((g.count(), g.tile(0)), (1, Tile { index: 0, m: 0, n: 0 }));
    }

    #[test]
    fn row_order_walks_its_tail_rows_one_after_another() {
        let rows: [u32; 7] = [6, 5, 4, 3, 2, 1, 0];
        let grid = TileGrid::new(7 * 128, 3 * 256, 128, 256, 4);
        let plain = RowOrder { grid, rows: rows.as_ptr(), tail_rows: 0 };
        for tail_rows in 0..=7 {
            let s = RowOrder { tail_rows, ..plain };
            let mut seen = [0u8; 21];
            for i in 0..s.count() {
                let t = s.tile(i);
                seen[(t.m * 3 + t.n) as usize] += 1;
            }
            assert!(seen.iter().all(|&c| c == 1), "tail_rows {tail_rows}");
            // The last tail_rows x 3 positions: table positions 7 - tail_rows.., columns fastest.
            for j in 0..tail_rows * 3 {
                let i = 21 - tail_rows * 3 + j;
                assert_eq!(s.tile(i), Tile { index: i, m: rows[(7 - tail_rows + j / 3) as usize], n: j % 3 });
            }
        }
        // Grouped before the tail as without one: 5 rows, a group of 4 then a group of 1.
        let s = RowOrder { tail_rows: 2, ..plain };
        assert_eq!(s.coords(1), (1, 0));
        assert_eq!(s.coords(12), (4, 0));
        assert_eq!(s.coords(14), (4, 2));
        for i in 0..12 {
            assert_eq!(s.coords(i), plain.coords(i));
        }
    }

    #[test]
    fn split_k_covers_every_k_block_of_every_tile_once() {
        for &(m, n, k_blocks, splits) in
            &[(64u32, 8192u32, 128u32, 4u32), (1, 256, 9, 4), (300, 700, 7, 7), (128, 256, 1, 1), (256, 4096, 224, 8)]
        {
            let s = SplitK { grid: TileGrid::new(m, n, 128, 256, 8), splits };
            let mut seen = vec![0u8; (s.grid.count() * k_blocks) as usize];
            for u in 0..s.count() {
                let t = s.tile(u);
                let (kb0, kb1) = s.k_range(u, k_blocks);
                assert!(kb0 < kb1 && kb1 <= k_blocks, "{m}x{n} kb {k_blocks} / {splits}: unit {u} has {kb0}..{kb1}");
                // The units of one tile are adjacent.
                assert_eq!(s.unit(u).0, u / splits);
                for kb in kb0..kb1 {
                    seen[((t.m * s.grid.n_tiles + t.n) * k_blocks + kb) as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{m}x{n} kb {k_blocks} / {splits}");
        }
    }

    #[test]
    fn stream_k_covers_every_k_block_once_in_even_ranges() {
        for &(m, n, k_blocks, ctas) in &[
            (64u32, 28672u32, 128u32, 132u32),
            (1, 256, 9, 4),
            (300, 700, 7, 13),
            (256, 28672, 128, 300),
            (128, 512, 1, 2),
        ] {
            let grid = TileGrid::new(m, n, 128, 256, 8);
            let s = StreamK::new(grid, k_blocks, ctas);
            assert!(grid.count() <= ctas && s.len <= k_blocks);
            let mut seen = vec![0u8; (grid.count() * k_blocks) as usize];
            let mut per_cta = vec![0u32; ctas as usize];
            let mut units = vec![0u32; grid.count() as usize];
            for u in 0..s.count() {
                let (kb0, kb1) = s.k_range(u, k_blocks);
                if kb0 == kb1 {
                    continue;
                }
                let t = s.segment(u).0;
                let (tile, slot) = s.unit(u);
                assert_eq!(tile, t);
                assert!(
                    slot < s.arrivals(t) && s.arrivals(t) <= s.slots(),
                    "unit {u}: slot {slot} of {}",
                    s.arrivals(t)
                );
                units[t as usize] += 1;
                per_cta[(u % ctas) as usize] += kb1 - kb0;
                for kb in kb0..kb1 {
                    seen[(t * k_blocks + kb) as usize] += 1;
                }
            }
            assert!(seen.iter().all(|&c| c == 1), "{m}x{n} kb {k_blocks} over {ctas}");
            // Every tile has exactly the units its arrival count says, and no CTA does more
            // than `len` k-blocks.
            for t in 0..grid.count() {
                assert_eq!(units[t as usize], s.arrivals(t), "tile {t}");
            }
            assert!(per_cta.iter().all(|&w| w <= s.len));
        }
    }

    #[test]
    fn owner_tiles_visit_every_tile_once_own_tiles_after_their_partials() {
        for &(rows, n, world) in
            &[(1000u32, 1544u32, 2u32), (128, 256, 4), (4096, 8, 4), (300, 700, 3), (640, 256, 1), (512, 2048, 8)]
        {
            let per = OwnerTiles::new(rows, n, (128, 256), 8, world, 0, 0).per_owner();
            for (lead, stride) in [0, 1, 3, per - 1, per, per + 5].into_iter().flat_map(|l| [(l, 0), (l, 3), (l, 132)])
            {
                // pos[rank][owner][local]: where `rank` walks that tile.
                let mut pos = vec![vec![vec![u32::MAX; per as usize]; world as usize]; world as usize];
                for rank in 0..world {
                    let s = OwnerTiles::new(rows, n, (128, 256), 8, world, rank, lead).rotated(stride);
                    assert_eq!((s.per_owner(), s.count()), (per, world * per));
                    let mut seen = vec![false; (world * per) as usize];
                    for i in 0..s.count() {
                        let t = s.tile(i);
                        let o = s.locate(t.m, t.n);
                        assert!(o.tm < s.m_tiles && o.tn < s.n_tiles && o.slot < per);
                        let k = (o.owner * per + o.slot) as usize;
                        assert!(!seen[k], "world {world} lead {lead}: tile {o:?} twice");
                        seen[k] = true;
                        pos[rank as usize][o.owner as usize][s.order(i).1 as usize] = i;
                    }
                    assert!(seen.iter().all(|&x| x));
                    if lead >= per || world == 1 {
                        // Everything sent first: the own block is the last.
                        let last = s.tile(s.count() - 1);
                        assert_eq!(s.locate(last.m, last.n).owner, rank);
                    }
                }
                // Every own tile comes `lead` positions or more after every other rank's send of it.
                let lead = lead.min(per);
                for (me, mine) in pos.iter().enumerate() {
                    for (q, theirs) in pos.iter().enumerate().filter(|&(q, _)| q != me) {
                        for (j, (&own, &sent)) in mine[me].iter().zip(&theirs[me]).enumerate() {
                            assert!(own > sent, "world {world} lead {lead}: rank {me}'s own tile {j} at {own}, rank {q} sends it at {sent}");
                            assert!(own - sent >= lead, "world {world} lead {lead} tile {j}: gap {}", own - sent);
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn turned_owner_tiles_share_own_tiles_among_the_walkers() {
        // 16384 x 8192 over 4 owners (1024 tiles each) on 132 CTAs and over 8 (512 each) on 128:
        // CTA counts that are multiples of the world. (132 CTAs over 8 owners, half a round per
        // wave, leave a few CTAs with none or twice their share: the turn is per round and a
        // round then straddles a wave.)
        for (world, ctas, rows) in [(4u32, 132u32, 4096u32), (8, 128, 2048)] {
            for lead in [1u32, 33, 256] {
                for (stride, balanced) in [(0u32, false), (ctas, true)] {
                    let s = OwnerTiles::new(rows, 8192, (128, 256), 8, world, 1, lead).rotated(stride);
                    let head = lead * (world - 1);
                    let mixed_end = head + (s.per_owner() - lead) * world;
                    let mut own = vec![0u32; ctas as usize];
                    let mut walked = vec![0u32; ctas as usize];
                    for i in head..mixed_end {
                        walked[(i % ctas) as usize] += 1;
                        let t = s.tile(i);
                        own[(i % ctas) as usize] += (s.locate(t.m, t.n).owner == 1) as u32;
                    }
                    // Turned: every CTA's share of own tiles is about a quarter of what it walks.
                    let fair = own.iter().zip(&walked).all(|(&o, &w)| o.abs_diff(w / world) <= 1);
                    assert_eq!(fair, balanced, "world {world} lead {lead} stride {stride}: own tiles per CTA {own:?}");
                }
            }
        }
    }

    #[test]
    fn grouped_tiles_visit_every_tile_once_group_by_group() {
        // Three groups: 300 rows, 0 rows, 129 rows.
        let (tm, n_tiles) = (128u32, 3u32);
        let rows = [300u32, 0, 129];
        let mut off = vec![0u32];
        let mut starts = vec![0u32];
        for r in rows {
            off.push(off.last().unwrap() + r.div_ceil(tm) * tm);
            starts.push(starts.last().unwrap() + r.div_ceil(tm) * n_tiles);
        }
        let s = GroupedTiles { group_off: off.as_ptr(), tile_start: starts.as_ptr(), groups: 3, tile_m: tm };
        let m_total = off[3] / tm;
        assert_eq!(s.count(), m_total * n_tiles);
        let mut seen = vec![false; (m_total * n_tiles) as usize];
        for i in 0..s.count() {
            let t = s.tile(i);
            assert!(t.m < m_total && t.n < n_tiles, "{t:?}");
            let k = (t.m * n_tiles + t.n) as usize;
            assert!(!seen[k], "{t:?} twice");
            seen[k] = true;
            // Group 0 (tile rows 0..3) first, then group 2 (tile row 3).
            assert_eq!(i < 3 * n_tiles, t.m < 3, "{t:?}");
        }
        assert!(seen.iter().all(|&x| x));
        assert_eq!(s.tile(0), Tile { index: 0, m: 0, n: 0 });
        assert_eq!(s.tile(1), Tile { index: 1, m: 1, n: 0 });
        assert_eq!(s.tile(3), Tile { index: 3, m: 0, n: 1 });
        assert_eq!(s.tile(9), Tile { index: 9, m: 3, n: 0 });
    }

    #[test]
    fn roles_are_contiguous_ranges() {
        let s = RoleSplit { compute: 3, intra_comm: 2, inter_send: 1, inter_reduce: 1 };
        assert_eq!(s.total(), 7);
        assert_eq!(s.role_of(0), Some((Role::Compute, 0)));
        assert_eq!(s.role_of(3), Some((Role::IntraComm, 0)));
        assert_eq!(s.role_of(4), Some((Role::IntraComm, 1)));
        assert_eq!(s.role_of(5), Some((Role::InterSend, 0)));
        assert_eq!(s.role_of(6), Some((Role::InterReduce, 0)));
        assert_eq!(s.role_of(7), None);
    }
}
