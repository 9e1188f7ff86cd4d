//! MoE dispatch + grouped GEMM in one persistent launch, written from the framework's pieces (the
//! protocol is documented on [`MoeParams`]):
//! - the router (every intra-comm CTA, a share of the tokens each) scans this rank's routing once
//!   and writes one record per token and destination; every router CTA copies a share of each
//!   node peer's records over NVLink, intra-comm CTA 0 the counts and, through FIFO + proxy, what
//!   other nodes get; CTA 0 then lays out what this rank receives ([`MoeScratch`] tables);
//! - in a fused launch the compute CTAs copy this rank's tokens into `x_heap` (where node peers
//!   read them; router CTA 0 sends them once per other node into a rank's `rx` there, after the
//!   counts and records) from the launch's start, while the router runs, instead of the pull
//!   CTAs after the layout: the peers' first tiles wait for those rows;
//! - pull CTAs (intra-comm, the router's CTA among them) move rows through a [`BulkRing`], taking
//!   items in order from a counter (the dispatch alone starts with the copies into `x_heap`),
//!   runs of records from each source in turn; a row is read once per destination rank and
//!   written from shared memory to every expert row it has there;
//! - compute CTAs then take pull items too, until their first tile's rows are in (the
//!   [`MOE_COMPUTE_HELPS`] flag), then run the GEMM engine with a [`GroupedTiles`] scheduler
//!   (expert by expert, the order the rows fill in), a [`RowGate`] (a tile waits for the rows of
//!   its tile row) and the local-store epilogue; the gate also picks the tile's expert in the
//!   stacked weights;
//! - with [`MOE_JOIN`] the pull CTAs run the engine too once no pull item is left, every CTA
//!   drawing its next tile from a counter ([`Claimed`]): without it they sat idle for the last
//!   third of a DeepSeek-like launch at 1 x 4 (the trace build's timeline);
//! - with [`MOE_SIDE_PULL`] the spare warps of every CTA running tiles take pull items too,
//!   beside the tiles ([`side_pull`]): an SM's write bandwidth, not its ring, bounds a pull CTA.
//!
//! Safety, for every `unsafe fn` below: `p` is the launch's [`MoeParams`] as `ops::moe` wrote it
//! (every address in it live for the launch, the peer table mapped, sizes within the documented
//! bounds), and the function runs inside that launch in the role and threads its docs name. Each
//! `# Safety` section adds what the caller must guarantee beyond that.
use crate::abi::*;
use crate::arch::*;
use crate::comm::nvlink::{copy_block, BulkRing};
use crate::comm::peers_from_next;
use crate::comm::signal::{arrive_and_wait, last_arriver, launch_epoch, signal};
use crate::comm::{fifo_push, fifo_quiet_claimed, signal_remote};
use crate::gemm::engine::store_c_cta;
use crate::gemm::feed::Feed;
use crate::gemm::*;
use crate::sched::{
    div_nz, rem_nz, Claimed, GaveUp, GroupedTiles, InputGate, Role, Tile, TileIter, TileScheduler, SIDE_THREADS,
};
use crate::sync::Bound;
use crate::{abi::trace as trace_ev, trace};

/// The launch's scratch tables (device memory, see [`MoeScratch`]).
#[derive(Clone, Copy)]
struct Tables {
    base: *mut u32,
    l: MoeScratch,
}

impl Tables {
    #[inline(always)]
    fn of(p: &MoeParams) -> Self {
        let l = MoeScratch::new(p.local_experts, p.world, p.cap_rows, p.gemm.roles.intra_comm);
        Self { base: p.scratch as *mut u32, l }
    }
    #[inline(always)]
    fn at(&self, word: u32) -> *mut u32 {
        // SAFETY: every word index used is inside the scratch (MoeScratch::words).
        unsafe { self.base.add(word as usize) }
    }
    /// # Safety
    /// `word` is below `self.l.words` (a word of the launch's scratch).
    #[inline(always)]
    unsafe fn get(&self, word: u32) -> u32 {
        *self.at(word)
    }
    /// # Safety
    /// As for [`Tables::get`]; no other thread accesses the word at the same time.
    #[inline(always)]
    unsafe fn set(&self, word: u32, v: u32) {
        *self.at(word) = v;
    }
    /// Router CTA `c`'s count for expert `e` (`lead`: of the tokens the expert leads on its rank).
    #[inline(always)]
    fn part(&self, p: &MoeParams, lead: bool, c: u32, e: u32) -> *mut u32 {
        self.at(self.l.route_part_at(lead, c, e, p.gemm.roles.intra_comm, p.experts))
    }
    /// The first `xe` row of source `s`'s rows for local expert `le` (where its entries'
    /// positions count from).
    ///
    /// # Safety
    /// `p` is the launch's parameters, read after the layout was published; `s < p.world`,
    /// `le < p.local_experts`.
    #[inline(always)]
    unsafe fn rows_from(&self, p: &MoeParams, s: u32, le: u32) -> u32 {
        self.get(self.l.expert_off + le) + self.get(self.l.src_off + le * p.world + s)
    }
    /// Rows of `xe` the layout uses; more than `cap_rows` means the layout failed.
    ///
    /// # Safety
    /// `p` is the launch's parameters (the scratch `self` was made from), read after the layout
    /// was published.
    #[inline(always)]
    unsafe fn rows_used(&self, p: &MoeParams) -> u32 {
        self.get(self.l.expert_off + p.local_experts)
    }
}

/// Record the launch's first routing error (`MOE_ERR_*` and three details) for the host.
///
/// # Safety
/// The file's contract (`p.errors` is the launch's `[u32; 4]`).
#[inline(always)]
unsafe fn report(p: &MoeParams, code: u32, a: u32, b: u32, c: u32) {
    let e = p.errors as *mut u32;
    if atom_cas_relaxed_gpu_u32(e, 0, code) == 0 {
        *e.add(1) = a;
        *e.add(2) = b;
        *e.add(3) = c;
    }
}

/// Whether the compute CTAs copy this rank's tokens into `x_heap` (a fused launch, before the
/// layout: [`moe`]) rather than the pull CTAs (the first pull items). Then [`ship`] sends them
/// to the other nodes, after the counts and records; otherwise the last copy does.
#[inline(always)]
fn compute_copies_x(p: &MoeParams) -> bool {
    p.mode == MOE_FUSED
}

/// The source at position `q` of this rank's receive order (me, me + 1, ...), a global rank.
#[inline(always)]
fn source_at(p: &MoeParams, q: u32) -> u32 {
    rem_nz(p.rank + q, p.world)
}

/// Local rank of global rank `r` if it shares this rank's node.
#[inline(always)]
fn local_of(p: &MoeParams, r: u32) -> Option<u32> {
    let first = p.rank - p.local_rank;
    (r >= first && r < first + p.local_world).then(|| r - first)
}

/// Thread 0: push one FIFO command for the proxy (to a rank on another node); false when the
/// push gave up (reported).
///
/// # Safety
/// The file's contract; one thread of the CTA pushes at a time.
#[inline(always)]
unsafe fn push(p: &MoeParams, b: &Bound, cmd: FifoCmd, to: u32) -> bool {
    fifo_push(&p.fifo, cmd, b.timeout_ns, b.diag, b.site(to, WAIT_FLAG)).is_ok()
}

/// Thread 0: raise flag word `idx` of rank `to` (any node) to `epoch`.
///
/// # Safety
/// `to < p.world` and `idx < MoeParams::flag_words(p.world)`.
#[inline(always)]
unsafe fn signal_rank(p: &MoeParams, b: &Bound, to: u32, idx: u32, epoch: u32) -> bool {
    match local_of(p, to) {
        Some(lr) => {
            signal((pick(&p.table().flags, lr) as *mut u32).add(idx as usize), epoch);
            true
        }
        None => signal_remote(&p.fifo, to, p.flags_off + 4 * idx as u64, epoch, b).is_ok(),
    }
}

/// Thread 0: wait until every other rank finished reading what this rank wrote last launch
/// (its `x_heap`, its `rx` there, and the records it put in their inboxes).
///
/// # Safety
/// The file's contract.
#[inline(always)]
unsafe fn wait_done(p: &MoeParams, epoch: u32, b: &Bound) -> bool {
    for d in 0..p.world {
        if d != p.rank {
            let f = (p.flags() as *const u32).add(p.done_flag(d) as usize);
            if b.flag(f, epoch.wrapping_sub(1), d).is_err() {
                return false;
            }
        }
    }
    true
}

impl MoeParams {
    /// This rank's flags (in the peer table, at its own local rank).
    ///
    /// # Safety
    /// `self.peers` points to the launch's [`MoePeers`].
    #[inline(always)]
    unsafe fn flags(&self) -> u64 {
        pick(&(*(self.peers as *const MoePeers)).flags, self.local_rank)
    }
    /// The peer table.
    ///
    /// # Safety
    /// As for [`MoeParams::flags`].
    #[inline(always)]
    unsafe fn table(&self) -> &MoePeers {
        &*(self.peers as *const MoePeers)
    }
}

/// Shared-memory words of a router CTA, per warp and expert: a histogram of the tokens that picked
/// the expert, a lane mask (the batch's lanes that picked it), and a histogram of the tokens whose
/// first expert on the expert's rank it is (their records are ordered by that expert); then per
/// expert the first record index of the tokens led by it on its rank. After those (zeroed each
/// launch), each expert's rank.
struct RouterSmem {
    base: u32,
    experts: u32,
}

// The router's words fit below the ring's barriers (its stages are reused only for shipping, after
// the scans).
const _: () = assert!(
    4 * (3 * MOE_ROUTER_WARPS + 2) * MOE_MAX_EXPERTS
        <= crate::kernels_info::allgather::BULK_CHUNK * crate::kernels_info::allgather::BULK_STAGES
);

impl RouterSmem {
    #[inline(always)]
    fn hist(&self, w: u32, e: u32) -> u32 {
        self.base + 4 * (w * self.experts + e)
    }
    #[inline(always)]
    fn mask(&self, w: u32, e: u32) -> u32 {
        self.base + 4 * ((MOE_ROUTER_WARPS + w) * self.experts + e)
    }
    #[inline(always)]
    fn lead(&self, w: u32, e: u32) -> u32 {
        self.base + 4 * ((2 * MOE_ROUTER_WARPS + w) * self.experts + e)
    }
    #[inline(always)]
    fn start(&self, e: u32) -> u32 {
        self.base + 4 * (3 * MOE_ROUTER_WARPS * self.experts + e)
    }
    /// Words zeroed at the start of each launch.
    #[inline(always)]
    fn words(&self) -> u32 {
        (3 * MOE_ROUTER_WARPS + 1) * self.experts
    }
    /// Expert e's rank (`e / local_experts`, one division per expert and launch).
    #[inline(always)]
    fn dst(&self, e: u32) -> u32 {
        self.base + 4 * (self.words() + e)
    }
}

/// One token's routing, read once per router pass. `K` is `top_k` rounded up to 4, 8 or 16 and
/// every loop over slots is written out to it, so the arrays stay in registers: read slot by slot
/// from memory, with a division per slot pair, the router took 0.37 ms for 8192 tokens at top-k 4.
#[derive(Clone, Copy)]
struct TokenRoute<const K: usize> {
    /// Experts by slot, `u32::MAX` for a slot ruled out or past `top_k`.
    ex: [u32; K],
    /// Each slot's destination rank (`u32::MAX` where `ex` is).
    dst: [u32; K],
    /// Slots whose expert is valid (bit j).
    valid: u32,
    /// The leading slots ([`moe_lead_slots`]).
    leads: u32,
}

impl<const K: usize> TokenRoute<K> {
    /// A lane without a token.
    const NONE: Self = Self { ex: [u32::MAX; K], dst: [u32::MAX; K], valid: 0, leads: 0 };

    /// Token t's route; with `check`, each slot ruled out is reported (an id outside
    /// `0..experts`, or one an earlier slot named).
    ///
    /// # Safety
    /// `t < p.tokens`, `p.top_k <= K`; `sm`'s expert ranks are filled.
    #[inline(always)]
    // The unrolled slots compare indices with the literal `$j`, `o < 0` among them.
    #[allow(unused_comparisons)]
    unsafe fn read(p: &MoeParams, t: u32, sm: &RouterSmem, check: bool) -> Self {
        let k = p.top_k;
        let raw = Self::slots(p.topk_idx, p, t, u32::MAX);
        let mut r = Self::NONE;
        macro_rules! slot {
            ($j:literal) => {
                if $j < k {
                    // A negative id reads as one past `experts`.
                    let e = raw[$j];
                    let mut dup = false;
                    for (o, &x) in raw.iter().enumerate() {
                        dup |= o < $j && x == e;
                    }
                    let code = if e >= p.experts {
                        MOE_ERR_BAD_EXPERT
                    } else if dup {
                        MOE_ERR_DUP_EXPERT
                    } else {
                        0
                    };
                    if code == 0 {
                        r.ex[$j] = e;
                        r.dst[$j] = ld_shared_u32(sm.dst(e));
                        r.valid |= 1 << $j;
                    } else if check {
                        report(p, code, t, $j, e);
                    }
                }
            };
        }
        unroll_below!(K, slot);
        r.leads = moe_lead_slots(&r.ex, &r.dst, k);
        r
    }

    /// Row t of a `[tokens, top_k]` array of 4-byte words at `base` (the routing's ids or
    /// weights), one word per slot, loaded together into registers; slots past `top_k` hold
    /// `past`.
    ///
    /// # Safety
    /// `t < p.tokens`, `p.top_k <= K`, `base` one of the launch's `[tokens, top_k]` arrays.
    #[inline(always)]
    // The unrolled slots compare indices with the literal `$j`.
    #[allow(unused_comparisons)]
    unsafe fn slots(base: u64, p: &MoeParams, t: u32, past: u32) -> [u32; K] {
        let k = p.top_k;
        let from = (base as *const u32).add((t * k) as usize);
        let mut v = [past; K];
        macro_rules! load {
            ($j:literal) => {
                if $j < k {
                    v[$j] = *from.add($j);
                }
            };
        }
        unroll_below!(K, load);
        v
    }

    /// Token t's weights by slot (their bits), loaded together: loaded entry by entry between
    /// the record's stores, which may alias them for all the compiler knows, each waited out a
    /// load's whole latency (the record pass took 14-25 us of the router's 33-45 on H200).
    ///
    /// # Safety
    /// As for [`TokenRoute::slots`].
    #[inline(always)]
    unsafe fn weights(p: &MoeParams, t: u32) -> [u32; K] {
        Self::slots(p.topk_weight, p, t, 0)
    }

    /// Write this token's record for destination `d` (led by one of its slots) at `rec`: the
    /// token, its entries there, then per entry `(local expert | slot << 16, position, weight)`
    /// in slot order (`wt`: [`TokenRoute::weights`]).
    ///
    /// # Safety
    /// `rec` is the record's place in the outbox; `pos` holds the slots' positions.
    #[inline(always)]
    unsafe fn write_record(&self, p: &MoeParams, (t, wt): (u32, &[u32; K]), d: u32, pos: &[u32; K], rec: *mut u32) {
        let mut n = 0u32;
        let el = p.local_experts;
        macro_rules! entry {
            ($o:literal) => {
                if self.valid & (1 << $o) != 0 && self.dst[$o] == d {
                    let w = rec.add(2 + 3 * n as usize);
                    *w = (self.ex[$o] - d * el) | ($o << 16);
                    *w.add(1) = pos[$o];
                    *w.add(2) = wt[$o];
                    n += 1;
                }
            };
        }
        unroll_below!(K, entry);
        *rec = t;
        *rec.add(1) = n;
    }
}

/// One batch of 32 tokens of a warp, one token per lane, its experts `ex` by slot (distinct):
/// for each slot j in `sel`, the lane's rank among the batch's lanes below it (earlier tokens)
/// that picked `ex[j]`, added to the warp's running count for the expert at `count(e)`, which
/// then moves on by the lanes that picked it. A lane's picked experts are distinct, so all its
/// slots go in one lane mask per expert: `mask(e)`, a zeroed shared word, left zeroed.
///
/// # Safety
/// All 32 lanes of the warp call it together (it synchronises the warp); `mask(e)` and
/// `count(e)` are shared-memory words of this warp alone for every expert a lane picks.
#[inline(always)]
unsafe fn rank_in_batch<const K: usize>(
    ex: &[u32; K],
    sel: u32,
    lane: u32,
    (mask, count): (impl Fn(u32) -> u32, impl Fn(u32) -> u32),
) -> [u32; K] {
    let mut at = [0u32; K];
    macro_rules! pick_expert {
        ($j:literal) => {
            if sel & (1 << $j) != 0 {
                red_or_shared_u32(mask(ex[$j]), 1 << lane);
            }
        };
    }
    unroll_below!(K, pick_expert);
    sync_warp();
    let lt = (1u32 << lane) - 1;
    // Slots whose expert no lower lane picked: this lane then moves the expert's count on.
    let mut lowest = 0u32;
    macro_rules! rank {
        ($j:literal) => {
            if sel & (1 << $j) != 0 {
                let below = (ld_shared_u32(mask(ex[$j])) & lt).count_ones();
                at[$j] = ld_shared_u32(count(ex[$j])) + below;
                lowest |= ((below == 0) as u32) << $j;
            }
        };
    }
    unroll_below!(K, rank);
    sync_warp();
    // Only the lowest lane with the expert touches its words now (one bit per slot kept, not a
    // copy of each mask; with every lane re-reading the mask it was a benign but reported race).
    macro_rules! advance {
        ($j:literal) => {
            if lowest & (1 << $j) != 0 {
                let m = ld_shared_u32(mask(ex[$j]));
                st_shared_u32(count(ex[$j]), ld_shared_u32(count(ex[$j])) + m.count_ones());
                st_shared_u32(mask(ex[$j]), 0);
            }
        };
    }
    unroll_below!(K, advance);
    sync_warp();
    at
}

/// Warp w's tokens `t0..t1`, 32 at a time: report the slots ruled out, count per expert the
/// tokens that picked it and the tokens it leads on its rank.
///
/// # Safety
/// Every lane of the warp calls it; `p.top_k <= K`; the warp's histograms are zeroed and the
/// expert ranks filled.
#[inline(always)]
unsafe fn count_tokens<const K: usize>(p: &MoeParams, sm: &RouterSmem, w: u32, (t0, t1): (u32, u32)) {
    let mut t = t0 + lane_id();
    while t < t1 {
        let r = TokenRoute::<K>::read(p, t, sm, true);
        macro_rules! count {
            ($j:literal) => {
                if r.valid & (1 << $j) != 0 {
                    atom_add_shared_u32(sm.hist(w, r.ex[$j]), 1);
                    if r.leads & (1 << $j) != 0 {
                        atom_add_shared_u32(sm.lead(w, r.ex[$j]), 1);
                    }
                }
            };
        }
        unroll_below!(K, count);
        t += 32;
    }
}

/// Warp w's tokens `t0..t1`, 32 at a time: positions per expert in token order, then the records,
/// ranked the same way among the tokens each leading expert leads (a token's leading experts are
/// distinct too: one per destination), written to the outbox.
///
/// # Safety
/// Every lane of the warp calls it after [`count_tokens`] and the scans turned the warp's
/// histograms into its first positions and the experts' first records.
#[inline(always)]
unsafe fn write_records<const K: usize>(p: &MoeParams, sm: &RouterSmem, w: u32, (t0, t1): (u32, u32)) {
    let lane = lane_id();
    let mut base = t0;
    while base < t1 {
        let t = base + lane;
        let r = if t < t1 { TokenRoute::<K>::read(p, t, sm, false) } else { TokenRoute::NONE };
        let wt = if t < t1 { TokenRoute::<K>::weights(p, t) } else { [0; K] };
        let mask = |e| sm.mask(w, e);
        let pos = rank_in_batch(&r.ex, r.valid, lane, (mask, |e| sm.hist(w, e)));
        let nth = rank_in_batch(&r.ex, r.leads, lane, (mask, |e| sm.lead(w, e)));
        macro_rules! record {
            ($j:literal) => {
                if r.leads & (1 << $j) != 0 {
                    let d = r.dst[$j];
                    let rec = (p.outbox + p.record_at(d, ld_shared_u32(sm.start(r.ex[$j])) + nth[$j])) as *mut u32;
                    r.write_record(p, (t, &wt), d, &pos, rec);
                }
            };
        }
        unroll_below!(K, record);
        base += 32;
    }
}

/// `$f::<K>(args)` with `K` the router's slot bound for `top_k` (4, 8 or 16).
macro_rules! by_top_k {
    ($top_k:expr, $f:ident($($arg:expr),*)) => {
        match $top_k {
            0..=4 => $f::<4>($($arg),*),
            5..=8 => $f::<8>($($arg),*),
            _ => $f::<16>($($arg),*),
        }
    };
}

/// Part `i` of `0..n` cut into `parts` near-equal contiguous parts.
#[inline(always)]
fn share(n: u32, parts: u32, i: u32) -> (u32, u32) {
    let per = n.div_ceil(parts);
    let a = (i * per).min(n);
    (a, (a + per).min(n))
}

/// The sum of `v` over this lane and the lanes below it (every lane of the warp calls it).
#[inline(always)]
fn warp_inclusive_sum(v: u32, lane: u32) -> u32 {
    let mut x = v;
    let mut d = 1;
    while d < 32 {
        let y = shfl_idx(x, lane.saturating_sub(d));
        if lane >= d {
            x += y;
        }
        d *= 2;
    }
    x
}

/// Every thread of the CTA, warp w taking groups `w`, `w + warps`, ...: each group's shared
/// words `word(group * n + i)`, `i < n`, replaced by their exclusive prefix sums; `total(group,
/// sum)` is called on lane 0 once a group is done.
///
/// # Safety
/// Every thread of the CTA calls it; no other thread touches the words meanwhile.
#[inline(always)]
unsafe fn scan_groups(word: impl Fn(u32) -> u32, groups: u32, n: u32, total: impl Fn(u32, u32)) {
    let (w, lane, warps) = (thread_idx_x() / 32, lane_id(), block_dim_x() / 32);
    for g in (w..groups).step_by(warps as usize) {
        let mut carry = 0;
        for i0 in (0..n).step_by(32) {
            let i = i0 + lane;
            let v = if i < n { ld_shared_u32(word(g * n + i)) } else { 0 };
            let incl = warp_inclusive_sum(v, lane);
            if i < n {
                st_shared_u32(word(g * n + i), carry + incl - v);
            }
            carry += shfl_idx(incl, 31);
        }
        if lane == 0 {
            total(g, carry);
        }
    }
}

/// Every thread of router CTA `c` (of the launch's `routers`: the pull CTAs): scan its share of
/// this rank's routing and write the share's records into the outbox, where they take their
/// places among every router CTA's (a record per token and destination it has experts on,
/// ordered by the token's first expert there, then by token); router CTA 0 also writes each
/// destination's counts. Two barriers over the router CTAs: after the counts of every share are
/// in the scratch (each CTA's prefix over those before it places its tokens), and after the
/// records (every router CTA then ships a share of them, [`ship`]). False when a wait gave up
/// (reported).
///
/// A pass is bound by the latency of each batch's loads, not by bandwidth, so it gains from
/// more SMs: on one CTA the router took 0.13 ms for 8192 tokens at top-k 4, over 16 it takes
/// 0.025 ms (both passes, the barriers and the prefixes; H100).
///
/// # Safety
/// Every thread of the router CTA calls it (it synchronises the CTA), with the dynamic shared
/// memory free for [`RouterSmem`]; every router CTA calls it once per launch.
#[inline(always)]
unsafe fn route(p: &MoeParams, tb: &Tables, c: u32, epoch: u32, b: &Bound) -> bool {
    let tid = thread_idx_x();
    let w = tid / 32;
    let nthreads = block_dim_x();
    let routers = p.gemm.roles.intra_comm;
    let sm = RouterSmem { base: dyn_smem_base(), experts: p.experts };
    let verdict = dyn_smem_base() + VERDICT_SMEM;
    let el = p.local_experts;
    for i in (tid..sm.words()).step_by(nthreads as usize) {
        st_shared_u32(sm.base + 4 * i, 0);
    }
    for e in (tid..p.experts).step_by(nthreads as usize) {
        st_shared_u32(sm.dst(e), div_nz(e, el));
    }
    sync_threads();
    // This CTA owns tokens c0..c1, its warp w the w-th part of those: token order is (CTA, warp)
    // order, so prefixes over CTAs, then warps, keep every expert's rows in token order.
    let (c0, c1) = share(p.tokens, routers, c);
    let (t0, t1) = share(c1 - c0, MOE_ROUTER_WARPS, w);
    let tokens = (c0 + t0, c0 + t1);
    by_top_k!(p.top_k, count_tokens(p, &sm, w, tokens));
    sync_threads();
    // Exclusive scans over this CTA's warps, in place; its totals go to the scratch.
    for e in (tid..p.experts).step_by(nthreads as usize) {
        let (mut run, mut led) = (0, 0);
        for ww in 0..MOE_ROUTER_WARPS {
            let v = ld_shared_u32(sm.hist(ww, e));
            st_shared_u32(sm.hist(ww, e), run);
            run += v;
            let v = ld_shared_u32(sm.lead(ww, e));
            st_shared_u32(sm.lead(ww, e), led);
            led += v;
        }
        *tb.part(p, false, c, e) = run;
        *tb.part(p, true, c, e) = led;
    }
    sync_threads();
    if tid == 0 {
        let ok = arrive_and_wait(tb.at(MoeScratch::COUNTED_BARRIER), routers, epoch, b, c).is_ok();
        st_shared_u32(verdict, ok as u32);
    }
    sync_threads();
    if ld_shared_u32(verdict) == 0 {
        sync_threads(); // every thread read the verdict before anyone rewrites it
        return false;
    }
    // Per expert: the tokens of the router CTAs before this one (where this CTA's positions and
    // records start), and of all (the destination's counts and the expert's records).
    let ob = p.outbox;
    for e in (tid..p.experts).step_by(nthreads as usize) {
        let [mut below, mut all, mut led_below, mut led] = [0u32; 4];
        // Eight CTAs' words in flight at a time: the loads, not the adds, take the time.
        for c8 in (0..routers).step_by(8) {
            let mut v = [[0u32; 2]; 8];
            for (u, v) in v.iter_mut().enumerate() {
                let cc = c8 + u as u32;
                if cc < routers {
                    *v = [*tb.part(p, false, cc, e), *tb.part(p, true, cc, e)];
                }
            }
            for (u, v) in v.iter().enumerate() {
                if c8 + (u as u32) < c {
                    below += v[0];
                    led_below += v[1];
                }
                all += v[0];
                led += v[1];
            }
        }
        for ww in 0..MOE_ROUTER_WARPS {
            st_shared_u32(sm.hist(ww, e), ld_shared_u32(sm.hist(ww, e)) + below);
            st_shared_u32(sm.lead(ww, e), ld_shared_u32(sm.lead(ww, e)) + led_below);
        }
        st_shared_u32(sm.start(e), led);
        let d = div_nz(e, el);
        if c == 0 {
            *((ob + p.counts_at(d)) as *mut u32).add(2 + (e - d * el) as usize) = all;
        }
    }
    sync_threads();
    // Records of a destination in the order of their tokens' first expert there (then token
    // order): the receiver fills expert by expert, as the grouped GEMM consumes them.
    scan_groups(
        |i| sm.start(i),
        p.world,
        el,
        |d, records| {
            if c == 0 {
                let counts = (ob + p.counts_at(d)) as *mut u32;
                *counts = p.tokens;
                *counts.add(1) = records;
            }
        },
    );
    sync_threads();
    by_top_k!(p.top_k, write_records(p, &sm, w, tokens));
    sync_threads();
    // Every router CTA ships a share of every destination's records (`ship`), so each waits
    // until all are written.
    if tid == 0 {
        let ok = arrive_and_wait(tb.at(MoeScratch::RECORDS_BARRIER), routers, records_written(epoch), b, c).is_ok();
        st_shared_u32(verdict, ok as u32);
    }
    sync_threads();
    let ok = ld_shared_u32(verdict) != 0;
    sync_threads(); // every thread read the verdict before anyone rewrites it
    ok
}

/// The records barrier's two arrivals per router CTA a launch ([`MoeScratch::RECORDS_BARRIER`]):
/// every record written into the outbox ([`route`]) ...
#[inline(always)]
fn records_written(epoch: u32) -> u32 {
    epoch.wrapping_mul(2).wrapping_sub(1)
}

/// ... and every share of them shipped ([`ship`]): the counter's epochs are twice the launch's.
#[inline(always)]
fn records_shipped(epoch: u32) -> u32 {
    epoch.wrapping_mul(2)
}

/// Where source s's counts and records for this rank are: its own stay in its outbox (at the
/// same offsets as in an inbox), the others' arrive in its inbox.
///
/// # Safety
/// The file's contract.
#[inline(always)]
unsafe fn received(p: &MoeParams, s: u32) -> u64 {
    if s == p.rank {
        p.outbox
    } else {
        pick(&p.table().inbox, p.local_rank)
    }
}

/// Every thread of router CTA `c` (of the launch's `routers`), after [`route`] (`routed`: it
/// succeeded, every router CTA's records are in the outbox): once every destination finished
/// with last launch's, copy share `c` of each node peer's records into its inbox (router CTA 0
/// also its counts; this rank's own stay in the outbox), and arrive at the records barrier; the
/// last CTA there raises `counts[me]` and `records[me]` at every rank of this node, this one
/// included. Router CTA 0 also has the proxy write the records and counts of ranks on other
/// nodes (each raising its flag there). Shares: one CTA copying every record took 55-60 us of a
/// fused launch's start at 1 x 2 and 1 x 4 (docs/PERF.md). The CTAs start at different peers,
/// so every link carries shares at once. True on thread 0 when this CTA's shares went out.
///
/// # Safety
/// Every thread of the router CTA calls it (it synchronises the CTA); `ring` is thread 0's
/// [`BulkRing`]. Every router CTA calls it once per launch, after `route`: the records barrier
/// counts two arrivals per router CTA a launch, one in each ([`records_written`],
/// [`records_shipped`]).
#[inline(always)]
unsafe fn ship(
    p: &MoeParams,
    tb: &Tables,
    c: u32,
    routed: bool,
    epoch: u32,
    b: &Bound,
    ring: Option<&mut BulkRing>,
) -> bool {
    let tid = thread_idx_x();
    let nthreads = block_dim_x();
    let routers = p.gemm.roles.intra_comm;
    let verdict = dyn_smem_base() + VERDICT_SMEM;
    if tid == 0 {
        let ok = routed && wait_done(p, epoch, b);
        // Other CTAs wrote the records with ordinary stores, and the router this CTA's shared
        // memory (the ring's stages now); bulk copies read and write them.
        fence_proxy_async_global();
        fence_proxy_async_shared();
        st_shared_u32(verdict, ok as u32);
    }
    sync_threads(); // nobody writes into an inbox before thread 0 saw it free
    let go = ld_shared_u32(verdict) != 0;
    sync_threads(); // every thread read the verdict before anyone rewrites it
    if !go {
        return false;
    }
    let ob = p.outbox;
    let el = p.local_experts;
    let mut ok = true;
    let mut ring = ring;
    let cw = MoeParams::counts_words(el) as u64 * 4;
    for q in 0..p.world {
        let d = rem_nz(p.rank + 1 + c + q, p.world);
        let at = p.counts_at(d);
        let n = *((ob + at) as *const u32).add(1);
        let (r0, r1) = (p.record_at(d, 0), p.record_at(d, n));
        match local_of(p, d) {
            // This rank's own stay in its outbox.
            Some(_) if d == p.rank => {}
            // This node: NVLink copies, the counts by CTA 0, the records in shares of a
            // multiple of 16 bytes.
            Some(lr) => {
                let inbox = pick(&p.table().inbox, lr);
                if c == 0 {
                    // Ordinary loads: this CTA stored the counts during the launch (`copy_block`'s
                    // non-coherent loads are for data nobody writes while the kernel runs). The
                    // records' copy below ends with the block barrier thread 0's arrival comes after.
                    let (from, to) = ((ob + at) as *const u32, (inbox + p.counts_at(p.rank)) as *mut u32);
                    for w in (tid..(cw / 4) as u32).step_by(nthreads as usize) {
                        *to.add(w as usize) = *from.add(w as usize);
                    }
                }
                let share = MoeParams::record_share(r0, r1, routers, c);
                let dst = inbox + p.record_at(p.rank, 0) - r0;
                ok &= copy_block(ob, dst, share, true, ring.as_deref_mut(), b, d, (tid, nthreads)) || tid != 0;
            }
            // Another node: the proxy writes records and counts, each raising its flag there.
            None if c == 0 && tid == 0 && ok => {
                let write = |from: u64, to: u64, bytes: u64, flag: u32| FifoCmd {
                    header: FifoCmd::header_word(OP_WRITE, 1, d, 0),
                    src: FifoCmd::loc(BUF_HEAP, p.outbox_off + from),
                    dst: FifoCmd::loc(BUF_HEAP, p.inbox_off + to),
                    bytes,
                    flag: FifoCmd::loc(BUF_HEAP, p.flags_off + 4 * flag as u64),
                    flag_value: epoch as u64,
                    ..Default::default()
                };
                ok = (r1 == r0 || push(p, b, write(r0, p.record_at(p.rank, 0), r1 - r0, p.records_flag(p.rank)), d))
                    && (r1 != r0 || signal_rank(p, b, d, p.records_flag(p.rank), epoch))
                    && push(p, b, write(at, p.counts_at(p.rank), cw, MoeParams::counts_flag(p.rank)), d);
            }
            None => {}
        }
    }
    // A CTA whose copy gave up (reported) never arrives: the flags stay down and the waits for
    // them give up too.
    if tid == 0 && ok && last_arriver(tb.at(MoeScratch::RECORDS_BARRIER), routers, records_shipped(epoch)) {
        for lr in 0..p.local_world {
            let flags = pick(&p.table().flags, lr) as *mut u32;
            signal(flags.add(MoeParams::counts_flag(p.rank) as usize), epoch);
            signal(flags.add(p.records_flag(p.rank) as usize), epoch);
        }
    }
    if c == 0 && tid == 0 && ok && compute_copies_x(p) && p.nodes() > 1 && p.x_items() > 0 {
        // The compute CTAs copied the tokens early; sending them to the other nodes before the
        // counts and records would queue those behind the tokens in the proxy (the FIFO is in
        // order): each node's layout waits for them, so the tokens go last. A rank without
        // tokens has no copies, no `xready` and nothing to send (nobody pulls from it).
        let xready = (p.flags() as *const u32).add(p.xready_flag() as usize);
        if b.flag(xready, epoch, p.rank).is_ok() {
            send_tokens(p, b, epoch);
        }
    }
    ok
}

/// Every thread of the router CTA, after [`route`]: once every rank's counts are in, lay
/// out what this rank receives and publish the tables (the local layout flag).
///
/// # Safety
/// Every thread of the router CTA calls it after [`route`]; `tb` is the launch's scratch.
#[inline(always)]
unsafe fn lay_out(p: &MoeParams, tb: &Tables, epoch: u32, b: &Bound) {
    let tid = thread_idx_x();
    let nthreads = block_dim_x();
    let el = p.local_experts;
    let l = tb.l;
    if tid == 0 {
        let mut ok = true;
        for s in 0..p.world {
            let f = (p.flags() as *const u32).add(MoeParams::counts_flag(s) as usize);
            if b.flag(f, epoch, s).is_err() {
                ok = false;
                break;
            }
        }
        st_shared_u32(dyn_smem_base() + VERDICT_SMEM, ok as u32);
    }
    // A failed wait already reported; the layout then has no tiles and no items.
    sync_threads();
    let counts = |s: u32| (received(p, s) + p.counts_at(s)) as *const u32;
    let n_tiles = p.gemm.n.div_ceil(TILE_N);
    // Per expert: rows, and its tile rows (into shared memory for the scan below).
    let sm = dyn_smem_base();
    for e in (tid..el).step_by(nthreads as usize) {
        let mut rows = 0;
        for q in 0..p.world {
            let s = source_at(p, q);
            let c = *counts(s).add(2 + e as usize);
            tb.set(l.recv_counts + s * el + e, c);
            tb.set(l.src_off + e * p.world + s, rows);
            rows += c;
        }
        // Rows fill in expert by expert (records are ordered so), for own and peers' tokens
        // alike: the GEMM walks experts in that order.
        tb.set(l.expert_rows + e, rows);
        st_shared_u32(sm + 4 * e, rows.div_ceil(TILE_M));
    }
    sync_threads();
    // Each expert's first tile row, and the tile rows in all (after them).
    scan_groups(|e| sm + 4 * e, 1, el, |_, all| st_shared_u32(sm + 4 * el, all));
    sync_threads();
    let off = ld_shared_u32(sm + 4 * el) * TILE_M;
    let fits = off <= p.cap_rows && ld_shared_u32(dyn_smem_base() + VERDICT_SMEM) != 0;
    for e in (tid..=el).step_by(nthreads as usize) {
        let first = ld_shared_u32(sm + 4 * e);
        // Nothing will be multiplied or received without a fitting layout: the tables say so to
        // every reader.
        let at = if fits || e == el { first * TILE_M } else { 0 };
        tb.set(l.expert_off + e, at);
        tb.set(l.tile_start + e, if fits { first * n_tiles } else { 0 });
    }
    if tid == 0 {
        if off > p.cap_rows {
            report(p, MOE_ERR_CAPACITY, off, p.cap_rows, 0);
        }
        // A layout that does not fit has no tiles and no pull items (this rank's own tokens are
        // still copied for the peers).
        tb.set(l.items, if compute_copies_x(p) { 0 } else { p.x_items() });
        let mut most = 0;
        for q in 0..p.world {
            let n = *counts(source_at(p, q)).add(1);
            let runs = if fits { n.div_ceil(p.run_records) } else { 0 };
            tb.set(l.items + 2 + q, runs);
            if q > 0 {
                most = most.max(runs);
            }
        }
        tb.set(l.items + 1, most);
    }
    sync_threads();
    // Per tile row: its expert, the rows it waits for, a zeroed counter.
    if fits {
        for e in (tid..el).step_by(nthreads as usize) {
            let first = ld_shared_u32(sm + 4 * e);
            let rows = tb.get(l.expert_rows + e);
            for m in 0..rows.div_ceil(TILE_M) {
                tb.set(l.m_expert + first + m, e);
                tb.set(l.m_target + first + m, (rows - m * TILE_M).min(TILE_M));
                tb.set(l.m_count + first + m, 0);
            }
        }
    }
    sync_threads();
    if tid == 0 {
        // Pull items are handed out from here on (to pull CTAs and, before their first tiles,
        // compute CTAs).
        tb.set(MoeScratch::ITEM_COUNTER, 0);
        tb.set(MoeScratch::ITEMS_DONE, 0);
        signal(tb.at(MoeScratch::LAYOUT_FLAG), epoch);
        if trace::ON {
            trace::stamp(epoch, trace_ev::LAID_OUT, block_idx_x(), 0, 0);
        }
    }
    // Padding rows named (read by the host only), after the flag and a warp per expert so the
    // stores coalesce: with a thread per expert and one thread summing the experts' offsets,
    // the layout took 42 us at 128 experts (11 us now, H100).
    if fits {
        let (w, lane) = (tid / 32, lane_id());
        let pad = MoeRow { src_rank: -1, token: -1, slot: -1, weight: 0.0 };
        for e in (w..el).step_by((nthreads / 32) as usize) {
            let first = ld_shared_u32(sm + 4 * e) * TILE_M;
            let rows = tb.get(l.expert_rows + e);
            for r in (first + rows + lane..first + rows.div_ceil(TILE_M) * TILE_M).step_by(32) {
                *(p.rows as *mut MoeRow).add(r as usize) = pad;
            }
        }
    }
}

/// Shared memory after a pull CTA's [`BulkRing`]: first the `xe` row where each (source, local
/// expert) pair's rows start ([`MOE_MAX_EXPERTS`] words, worked out once per launch), then the
/// records of the rows being moved, staged by the whole CTA with each entry's `xe` row already
/// resolved. The copying thread then issues a row's stores from shared memory alone: with the
/// tables read from global memory per store, their latency, not the copies, set the pace
/// (measured: about 4000 cycles per row at top-k 4).
const BASE_SMEM: u32 = crate::kernels_info::allgather::BULK_SMEM_BYTES.next_multiple_of(16);
const REC_SMEM: u32 = BASE_SMEM + 4 * MOE_MAX_EXPERTS;
const REC_SMEM_BYTES: u32 = crate::kernels_info::gemm::SMEM_BYTES - 16 - REC_SMEM;
/// A word after the staged records: one thread's verdict, broadcast to the CTA.
const VERDICT_SMEM: u32 = crate::kernels_info::gemm::SMEM_BYTES - 16;

/// Write `xe` row `row`'s entry of the row table ([`MoeRow`]): source rank `s`, its token, and
/// from the record's entry its slot (the tag's high half) and weight (bits).
///
/// # Safety
/// The file's contract; `row` is a row the layout gave this entry.
#[inline(always)]
unsafe fn row_entry(p: &MoeParams, row: u32, s: u32, token: u32, (tag, weight): (u32, u32)) {
    st_global_v4_u32((p.rows as *mut [u32; 4]).add(row as usize), [s, token, tag >> 16, weight]);
}

/// The write side of the rows of one source: where its rows go in `xe` (the bases in shared
/// memory) and the row table. A staged record is the inbox's (token, entries, then per entry
/// `(local expert | slot << 16, position, weight)`) with each position replaced by its `xe` row.
struct Scatter<'a> {
    p: &'a MoeParams,
    src_rank: u32,
    /// Shared address of the bases `[world][local_experts]`.
    bases: u32,
}

impl Scatter<'_> {
    /// Shared address of entry i of the staged record at `rec` (the record's words:
    /// [`MoeParams::record_words`]).
    #[inline(always)]
    fn entry(rec: u32, i: u32) -> u32 {
        rec + 4 * (2 + 3 * i)
    }

    /// The `xe` row of entry i of the resolved record at `rec`.
    ///
    /// # Safety
    /// `rec` is the shared address of a record resolved by [`Scatter::resolve`], `i` below its
    /// entries.
    #[inline(always)]
    unsafe fn row(rec: u32, i: u32) -> u32 {
        ld_shared_u32(Self::entry(rec, i) + 4)
    }

    /// Every thread of the CTA, once per launch after the layout was published: the bases.
    ///
    /// # Safety
    /// `tb` is the launch's scratch, its layout published and fitting `cap_rows`; `bases` is the
    /// CTA's shared region of [`MOE_MAX_EXPERTS`] words.
    #[inline(always)]
    unsafe fn fill_bases(p: &MoeParams, tb: &Tables, bases: u32) {
        let (tid, nthreads) = (thread_idx_x(), block_dim_x());
        let el = p.local_experts;
        for i in (tid..p.world * el).step_by(nthreads as usize) {
            let (s, le) = (div_nz(i, el), rem_nz(i, el));
            st_shared_u32(bases + 4 * i, tb.rows_from(p, s, le));
        }
    }

    /// Every thread of the CTA, after the records `rec(0..count)` were staged and a block
    /// barrier: replace each entry's position by its `xe` row and write the row's table entry.
    ///
    /// # Safety
    /// The records were staged from this rank's inbox for this source (their entries name rows
    /// the layout gave it, which fits `cap_rows`); the bases are filled; a block barrier follows
    /// before anyone reads the rows.
    #[inline(always)]
    unsafe fn resolve(&self, count: u32, rec: impl Fn(u32) -> u32) {
        let (tid, nthreads) = (thread_idx_x(), block_dim_x());
        let el = self.p.local_experts;
        for r in (tid..count).step_by(nthreads as usize) {
            let rec = rec(r);
            let t = ld_shared_u32(rec);
            for i in 0..ld_shared_u32(rec + 4) {
                let e = Self::entry(rec, i);
                let tag = ld_shared_u32(e);
                let row = ld_shared_u32(self.bases + 4 * (self.src_rank * el + (tag & 0xffff))) + ld_shared_u32(e + 4);
                st_shared_u32(e + 4, row);
                row_entry(self.p, row, self.src_rank, t, (tag, ld_shared_u32(e + 8)));
            }
        }
    }

    /// Issue the stores of piece `pc` of the row of the staged record at `rec` from `stage`.
    ///
    /// # Safety
    /// `rec` is the shared address of a resolved record ([`Scatter::resolve`]); `pc <
    /// p.pieces()`; `stage` is a ring stage holding that piece; called by the thread that holds
    /// the ring.
    #[inline(always)]
    unsafe fn store(&self, rec: u32, pc: u32, stage: u32) {
        let p = self.p;
        let (off, len) = p.piece(pc);
        for i in 0..ld_shared_u32(rec + 4) {
            bulk_store(p.xe + Self::row(rec, i) as u64 * p.row_bytes() + off, stage, len);
        }
    }

    /// Every thread of the CTA, after the stores of the resolved records `rec(0..count)`
    /// completed and a block barrier: count each row into its tile row.
    ///
    /// # Safety
    /// `rec(r)` for `r < count` as for [`Scatter::store`]; the thread that issued the stores
    /// waited for them and fenced the async proxy before the barrier.
    #[inline(always)]
    unsafe fn count(&self, tb: &Tables, count: u32, rec: impl Fn(u32) -> u32) {
        let (tid, nthreads) = (thread_idx_x(), block_dim_x());
        // Cumulative: the rows the barrier ordered before this fence are released with the counts.
        fence_acq_rel_gpu();
        for r in (tid..count).step_by(nthreads as usize) {
            let rec = rec(r);
            for i in 0..ld_shared_u32(rec + 4) {
                red_add_relaxed_gpu_u32(tb.at(tb.l.m_count + Self::row(rec, i) / TILE_M), 1);
            }
        }
    }
}

/// Whether pull items take this rank's own runs first ([`MOE_OWN_FIRST`]).
#[inline(always)]
fn own_first(p: &MoeParams) -> bool {
    p.flags & MOE_OWN_FIRST != 0 && p.world > 1
}

/// Pull items that move runs of records (after the `x_heap` copies), from the layout's counts
/// (this rank's own runs, and the most runs any peer has): the most runs any source has, once
/// per source; with [`MOE_OWN_FIRST`] the own runs, then the peers' most once per peer.
///
/// # Safety
/// `tb` is the launch's scratch, read after the layout was published.
#[inline(always)]
unsafe fn runs_items(p: &MoeParams, tb: &Tables) -> u32 {
    let (own, peers) = (tb.get(tb.l.items + 2), tb.get(tb.l.items + 1));
    if own_first(p) {
        own + peers * (p.world - 1)
    } else {
        own.max(peers) * p.world
    }
}

/// Pull item `j` of the runs (below [`runs_items`]): (run, receive position of its source);
/// a run past its source's last is an empty item.
///
/// # Safety
/// As for [`runs_items`].
#[inline(always)]
unsafe fn run_of(p: &MoeParams, tb: &Tables, j: u32) -> (u32, u32) {
    let own = tb.get(tb.l.items + 2);
    if !own_first(p) {
        (div_nz(j, p.world), rem_nz(j, p.world))
    } else if j < own {
        (j, 0)
    } else {
        let k = j - own;
        (div_nz(k, p.world - 1), 1 + rem_nz(k, p.world - 1))
    }
}

/// Pull item `j` of the runs (below [`runs_items`]) as [`run_of`] says, or `None` for an empty
/// item (a run past its source's last): what the pull CTAs ([`pull_item`]) and the side threads
/// ([`side_item`]) both take.
///
/// # Safety
/// As for [`runs_items`].
#[inline(always)]
unsafe fn run_taken(p: &MoeParams, tb: &Tables, j: u32) -> Option<(u32, u32)> {
    let (r, q) = run_of(p, tb, j);
    (r < tb.get(tb.l.items + 2 + q)).then_some((r, q))
}

/// Records `r0..r1` of source `s` (whose records are at `from`: [`received`]) that its run `r`
/// moves.
///
/// # Safety
/// The file's contract; read after the layout was published (every source's counts are in).
#[inline(always)]
unsafe fn run_records_range(p: &MoeParams, from: u64, s: u32, r: u32) -> (u32, u32) {
    let n = *((from + p.counts_at(s)) as *const u32).add(1);
    let r0 = r * p.run_records;
    (r0, (r0 + p.run_records).min(n))
}

/// Who runs [`pull`], and until when.
#[derive(Clone, Copy)]
enum Puller {
    /// A pull CTA, one of `ctas`: it takes items until none is left; the last of them to finish
    /// raises `done[me]` on every rank once every item is done.
    Pull { ctas: u32 },
    /// A compute CTA before its first tile: it takes items while that tile's rows (tile row
    /// `first`, or none: `u32::MAX`) are not all in, so the SMs the GEMM cannot use yet move rows.
    Helper { first: u32 },
}

/// A pull CTA's state across its items (thread 0's).
struct PullState {
    /// Sources whose rows are known to be readable (one bit per source rank; world <=
    /// `MOE_MAX_WORLD` = 64).
    ready: u64,
    /// Sources whose records are known to be in the inbox.
    have: u64,
    /// This CTA has not written `x_heap` yet this launch.
    first_x: bool,
}

/// Every thread of a CTA that moves rows (thread 0 holds the ring): items handed out in order
/// by a counter the layout reset, first copies of this rank's tokens into `x_heap` (the last
/// raises `xready`), then runs of records, one source after another in turn (records staged in
/// shared memory a batch at a time), each item counted done when finished.
///
/// # Safety
/// Every thread of the CTA calls it (it synchronises the CTA) after the layout was published,
/// with the dynamic shared memory laid out as the ring, then the staged records; `ring` is
/// thread 0's [`BulkRing`] (`None` on the other threads).
#[inline(always)]
unsafe fn pull(p: &MoeParams, tb: &Tables, who: Puller, epoch: u32, b: &Bound, mut ring: Option<&mut BulkRing>) {
    let tid = thread_idx_x();
    let l = tb.l;
    let fits = tb.rows_used(p) <= p.cap_rows;
    let verdict = dyn_smem_base() + VERDICT_SMEM;
    // Without a fitting layout there are no runs of records (`lay_out`), so no bases are needed.
    let bases = dyn_smem_base() + BASE_SMEM;
    if fits {
        Scatter::fill_bases(p, tb, bases);
    }
    // The bases are in, and every thread read the verdicts before the word is reused below.
    sync_threads();
    let items = tb.get(l.items) + runs_items(p, tb);
    let mut st = PullState { ready: 1u64 << p.rank, have: 0, first_x: true };
    loop {
        if tid == 0 {
            let stop = match who {
                Puller::Helper { first } if first != u32::MAX => {
                    let target = tb.get(l.m_target + first);
                    (ld_acquire_gpu_u32(tb.at(l.m_count + first)).wrapping_sub(target) as i32) >= 0
                }
                _ => false,
            };
            let item = if stop { u32::MAX } else { atom_add_relaxed_gpu_u32(tb.at(MoeScratch::ITEM_COUNTER), 1) };
            st_shared_u32(verdict, item);
        }
        sync_threads();
        let item = ld_shared_u32(verdict);
        sync_threads(); // every thread read the item before the word is rewritten
        if item >= items {
            break;
        }
        pull_item(p, tb, item, epoch, b, ring.as_deref_mut(), &mut st);
        if tid == 0 {
            // The item's reads of peers' memory and its writes are done (the ring waited); the
            // last pull CTA out waits until every item is, then raises `done` at system scope.
            // A system-scope fence per item here slowed the pull by about 5%.
            atom_add_acq_rel_gpu_u32(tb.at(MoeScratch::ITEMS_DONE), 1);
        }
    }
    if trace::ON && tid == 0 {
        trace::stamp(epoch, trace_ev::PULLED, block_idx_x(), matches!(who, Puller::Helper { .. }) as u32, 0);
    }
    if let (Puller::Pull { ctas }, 0) = (who, tid) {
        // Helpers and side threads may still be moving rows: the last pull CTA out raises
        // `done[me]` once every item is done; the others go on (to the tiles) without waiting.
        if last_arriver(tb.at(MoeScratch::FINISH_COUNTER), ctas, epoch)
            && b.flag(tb.at(MoeScratch::ITEMS_DONE), items, 0).is_ok()
        {
            if p.engines() && !engines_reset(p, b) {
                return;
            }
            for d in 0..p.world {
                if d != p.rank && !signal_rank(p, b, d, p.done_flag(p.rank), epoch) {
                    break;
                }
            }
        }
    }
}

/// Thread 0 of the last pull CTA, every item done ([`MOE_ENGINES`]): for each other rank s of
/// the node, wait until its copy engine's `engine_in[s]` is up (also where no row of s was
/// read: a flag left to land later would open the next launch's `rx` early) and set it back to
/// zero; the `done` signals that follow order the resets before the sources' next copies. False
/// when a wait gave up (reported).
///
/// # Safety
/// The file's contract; every pull item of the launch is done.
#[inline(always)]
unsafe fn engines_reset(p: &MoeParams, b: &Bound) -> bool {
    for (_, lr) in peers_from_next(p.local_rank, p.local_world) {
        let s = p.rank - p.local_rank + lr;
        let f = (p.flags() as *mut u32).add(p.engine_in_flag(s) as usize);
        if b.flag(f, 1, s).is_err() {
            return false;
        }
        core::ptr::write_volatile(f, 0);
    }
    true
}

/// Thread 0 of the last intra-comm CTA at its start ([`MOE_ENGINES`]): once every peer's
/// `done` of the last launch is in (it read this rank's tokens from its `rx` and reset their
/// `engine_in`), raise `engine_go` for the host's stream to copy this launch's. Raised also when
/// that wait gave up (reported, the launch fails): the stream waits on nothing else, so it
/// never hangs on a peer.
///
/// # Safety
/// The file's contract.
#[inline(always)]
unsafe fn engines_go(p: &MoeParams, epoch: u32, b: &Bound) {
    let _ = wait_done(p, epoch, b);
    signal((p.flags() as *mut u32).add(p.engine_go_flag() as usize), 1);
}

/// Every thread of a CTA in [`pull`]: pull item `item`.
///
/// # Safety
/// As for [`pull`], `item` below the launch's items, taken by this CTA alone.
#[inline(always)]
unsafe fn pull_item(
    p: &MoeParams,
    tb: &Tables,
    item: u32,
    epoch: u32,
    b: &Bound,
    mut ring: Option<&mut BulkRing>,
    st: &mut PullState,
) {
    let (tid, nthreads) = (thread_idx_x(), block_dim_x());
    let l = tb.l;
    let pieces = p.pieces();
    let x_items = tb.get(l.items);
    if item < x_items {
        if let Some(ring) = ring.as_deref_mut() {
            copy_x(p, tb, item, epoch, b, ring, &mut st.first_x);
        }
        return;
    }
    // Run `r` of the source at receive position `q`: records r0..r1.
    let Some((r, q)) = run_taken(p, tb, item - x_items) else {
        return;
    };
    let s = source_at(p, q);
    let (src, ready_flag, ready) = rows_of(p, s, epoch);
    let verdict = dyn_smem_base() + VERDICT_SMEM;
    if tid == 0 {
        if st.have & (1 << s) == 0 {
            // Its records are in the inbox once `records[s]` is up: an NVLink copy from this
            // node, the proxy's write from another.
            let f = (p.flags() as *const u32).add(p.records_flag(s) as usize);
            if b.flag(f, epoch, s).is_ok() {
                st.have |= 1 << s;
            }
        }
        // (`pull` synchronised after every thread read the item from this word.)
        st_shared_u32(verdict, ((st.have >> s) & 1) as u32);
    }
    sync_threads();
    let have = ld_shared_u32(verdict) != 0;
    sync_threads(); // every thread read the verdict before the word is rewritten
    if !have {
        // The wait reported (the launch fails): the inbox holds an earlier launch's records, or
        // none, whose positions would send rows anywhere. Nothing of this source is moved.
        return;
    }
    let rec_bytes = MoeParams::record_words(p.top_k) * 4;
    let batch = REC_SMEM_BYTES / rec_bytes;
    let staged = dyn_smem_base() + REC_SMEM;
    let srec = |r: u32| staged + r * rec_bytes;
    let from = received(p, s);
    let (r0, r1) = run_records_range(p, from, s, r);
    let sc = Scatter { p, src_rank: s, bases: dyn_smem_base() + BASE_SMEM };
    let mut b0 = r0;
    while b0 < r1 {
        let b1 = (b0 + batch).min(r1);
        let words = (b1 - b0) * rec_bytes / 4;
        let recs = (from + p.record_at(s, b0)) as *const u32;
        for w in (tid..words).step_by(nthreads as usize) {
            st_shared_u32(staged + 4 * w, *recs.add(w as usize));
        }
        sync_threads();
        sc.resolve(b1 - b0, srec);
        sync_threads();
        if q == 0 && p.flags & MOE_GATHER != 0 {
            // Own tokens stay where they are: the GEMM reads them from `x` (the table entries
            // resolved above say where).
            if tid == 0 {
                st_shared_u32(verdict, 1);
            }
        } else if let Some(ring) = ring.as_deref_mut() {
            if st.ready & (1 << s) == 0 && b.flag(ready_flag, ready, s).is_ok() {
                fence_proxy_async_global();
                st.ready |= 1 << s;
            }
            let moved = st.ready & (1 << s) != 0
                && ring.gather(
                    (b1 - b0) * pieces,
                    |i| {
                        let (r, pc) = row_piece(p, i);
                        let (off, len) = p.piece(pc);
                        Some((src + ld_shared_u32(srec(r)) as u64 * p.row_bytes() + off, len))
                    },
                    |i, stage| {
                        let (r, pc) = row_piece(p, i);
                        sc.store(srec(r), pc, stage);
                    },
                    b,
                    item,
                );
            // The ring waited for the stores; the rows are readable by TMA loads elsewhere
            // once counted.
            fence_proxy_async_global();
            st_shared_u32(verdict, moved as u32);
        }
        sync_threads();
        if ld_shared_u32(verdict) != 0 {
            sc.count(tb, b1 - b0, srec);
        }
        sync_threads(); // the staged records are rewritten next
        b0 = b1;
    }
}

/// Where source `s`'s rows are: this rank's x for its own, a node peer's x_heap (with the copy
/// engines: this rank's own rx), or (another node) the rx of the rank here that shares its local
/// rank; the flag that says so (null for its own), and the value it waits for (an epoch, or the
/// copy engines' 1).
///
/// # Safety
/// The file's contract.
#[inline(always)]
unsafe fn rows_of(p: &MoeParams, s: u32, epoch: u32) -> (u64, *const u32, u32) {
    match local_of(p, s) {
        Some(_) if s == p.rank => (p.x, core::ptr::null::<u32>(), epoch),
        Some(_) if p.engines() => {
            let f = (p.flags() as *const u32).add(p.engine_in_flag(s) as usize);
            (pick(&p.table().rx, p.local_rank) + p.rx_at(s), f, 1)
        }
        Some(lr) => {
            let f = (pick(&p.table().flags, lr) as *const u32).add(p.xready_flag() as usize);
            (pick(&p.table().x_heap, lr), f, epoch)
        }
        None => {
            let lr = rem_nz(s, p.local_world);
            let f = (pick(&p.table().flags, lr) as *const u32).add(p.rxready_flag(s) as usize);
            (pick(&p.table().rx, lr) + p.rx_at(s), f, epoch)
        }
    }
}

/// The side threads' shared memory ([`MOE_SIDE_PULL`]; `kernels_info::gemm::SIDE_BYTES`, past
/// the engine's): the launch's epoch (thread 0 leaves it before the engine starts), the item
/// drawn, a verdict, then the sources whose records are known in and whose rows are known
/// readable (a bit per source, 64-bit words).
#[inline(always)]
fn side_smem() -> u32 {
    use crate::kernels_info::gemm::{side_off, STAGES};
    dyn_smem_base() + side_off(STAGES, TILE_N)
}
const SIDE_EPOCH: u32 = 0;
const SIDE_ITEM: u32 = 4;
const SIDE_VERDICT: u32 = 8;
const SIDE_HAVE: u32 = 16;
const SIDE_READY: u32 = 24;
const _: () = assert!(SIDE_READY + 8 <= crate::kernels_info::gemm::SIDE_BYTES);

/// Named barrier of the side threads (the consumers' epilogues use 1 and 2).
const SIDE_BARRIER: u32 = 10;

// A lane resolves each entry of a record.
const _: () = assert!(MOE_MAX_TOP_K <= 32);

/// Vectors each side thread loads before storing them ([`side_item`]): four fit its 40
/// registers beside the rest.
const SIDE_AHEAD: u32 = 4;

/// The side threads ([`SIDE_THREADS`] of a CTA running tiles, thread `t`; [`MOE_SIDE_PULL`]):
/// pull items from the launch's counter beside the tiles until none is left, each counted done.
/// Only runs of records (a fused launch's `x_heap` copies are the compute CTAs', before the
/// layout: no such item is in the list).
///
/// # Safety
/// The file's contract; the layout of this launch was published before the engine started, and
/// `smem` is the side threads' shared memory ([`side_smem`]).
#[inline(always)]
unsafe fn side_pull(p: &MoeParams, tb: &Tables, smem: u32, t: u32) {
    let l = tb.l;
    let b = Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: Role::Compute as u32 };
    let x_items = tb.get(l.items);
    let items = x_items + runs_items(p, tb);
    if t == 0 {
        st_shared_u64(smem + SIDE_HAVE, 0);
        st_shared_u64(smem + SIDE_READY, 1 << p.rank);
    }
    loop {
        if t == 0 {
            st_shared_u32(smem + SIDE_ITEM, atom_add_relaxed_gpu_u32(tb.at(MoeScratch::ITEM_COUNTER), 1));
        }
        named_barrier_sync(SIDE_BARRIER, SIDE_THREADS);
        let item = ld_shared_u32(smem + SIDE_ITEM);
        if item >= items {
            break;
        }
        if item >= x_items {
            side_item(p, tb, item - x_items, smem, t, &b);
        }
        // Every row of the item counted, and every thread read the item's words.
        named_barrier_sync(SIDE_BARRIER, SIDE_THREADS);
        if t == 0 {
            atom_add_acq_rel_gpu_u32(tb.at(MoeScratch::ITEMS_DONE), 1);
        }
    }
}

/// The side threads, run `j` of the pull items (below [`runs_items`]): a warp a record, lane i
/// resolving entry i (its `xe` row, its row-table entry), every lane copying its share of the
/// token's row to every entry's row, then counting them into their tile rows.
///
/// # Safety
/// As for [`side_pull`]; the item is this CTA's alone.
#[inline(always)]
unsafe fn side_item(p: &MoeParams, tb: &Tables, j: u32, smem: u32, t: u32, b: &Bound) {
    let l = tb.l;
    let Some((r, q)) = run_taken(p, tb, j) else {
        return;
    };
    let s = source_at(p, q);
    if t == 0 {
        let epoch = ld_shared_u32(smem + SIDE_EPOCH);
        let (_, ready_flag, ready) = rows_of(p, s, epoch);
        let mut have = ld_shared_u64(smem + SIDE_HAVE);
        let records = (p.flags() as *const u32).add(p.records_flag(s) as usize);
        if have & (1 << s) == 0 && b.flag(records, epoch, s).is_ok() {
            have |= 1 << s;
            st_shared_u64(smem + SIDE_HAVE, have);
        }
        let mut readable = ld_shared_u64(smem + SIDE_READY);
        if (have & !readable) & (1 << s) != 0 && b.flag(ready_flag, ready, s).is_ok() {
            readable |= 1 << s;
            st_shared_u64(smem + SIDE_READY, readable);
        }
        st_shared_u32(smem + SIDE_VERDICT, ((have & readable) >> s) as u32 & 1);
    }
    named_barrier_sync(SIDE_BARRIER, SIDE_THREADS);
    if ld_shared_u32(smem + SIDE_VERDICT) == 0 {
        return; // a wait reported (the launch fails): nothing of this source is moved
    }
    let (src, _, _) = rows_of(p, s, 0);
    let from = received(p, s);
    let (r0, r1) = run_records_range(p, from, s, r);
    let (lane, rb) = (t % 32, p.row_bytes());
    let vecs = (rb / 16) as u32;
    let mut i = r0 + t / 32;
    while i < r1 {
        let rec = (from + p.record_at(s, i)) as *const u32;
        let (token, entries) = (*rec, *rec.add(1));
        let mut row = 0;
        if lane < entries {
            let e = rec.add(2 + 3 * lane as usize);
            let tag = *e;
            let le = tag & 0xffff;
            row = tb.rows_from(p, s, le) + *e.add(1);
            row_entry(p, row, s, token, (tag, *e.add(2)));
        }
        let row_src = src + token as u64 * rb;
        // A warp-uniform loop: every lane takes part in each shuffle below.
        let mut v0 = 0;
        while v0 < vecs {
            let mut x = [[0u32; 4]; SIDE_AHEAD as usize];
            for (a, v) in x.iter_mut().enumerate() {
                let at = v0 + lane + 32 * a as u32;
                if at < vecs {
                    // Plain loads: a peer's rows are written during the launch.
                    *v = ld_global_v4_u32((row_src + at as u64 * 16) as *const [u32; 4]);
                }
            }
            for k in 0..entries {
                let to = p.xe + shfl_idx(row, k) as u64 * rb;
                for (a, v) in x.iter().enumerate() {
                    let at = v0 + lane + 32 * a as u32;
                    if at < vecs {
                        st_global_v4_u32((to + at as u64 * 16) as *mut [u32; 4], *v);
                    }
                }
            }
            v0 += 32 * SIDE_AHEAD;
        }
        // The warp's stores, then each entry's count released (the producers' waits fence the
        // async proxy before their TMA loads).
        sync_warp();
        if lane < entries {
            fence_acq_rel_gpu();
            red_add_relaxed_gpu_u32(tb.at(l.m_count + row / TILE_M), 1);
        }
        i += SIDE_THREADS / 32;
    }
}

/// Copy unit `i` of a run of whole rows, each moved in [`MoeParams::pieces`] pieces: (row of the
/// run, piece).
#[inline(always)]
fn row_piece(p: &MoeParams, i: u32) -> (u32, u32) {
    let pieces = p.pieces();
    (div_nz(i, pieces), rem_nz(i, pieces))
}

/// Thread 0 of a CTA that copies this rank's tokens (a pull CTA taking an item, or a compute
/// CTA before the layout): chunk `item` of them into `x_heap`, where this node's peers read
/// them and from where the proxy sends them to the other nodes; the last chunk raises `xready`.
/// `first` is set until the CTA's first chunk of the launch, which waits until every peer
/// finished reading the last launch's.
///
/// # Safety
/// The file's contract; `item < p.x_items()`, copied by this CTA alone this launch.
#[inline(always)]
unsafe fn copy_x(p: &MoeParams, tb: &Tables, item: u32, epoch: u32, b: &Bound, ring: &mut BulkRing, first: &mut bool) {
    if *first {
        let _ = wait_done(p, epoch, b);
        *first = false;
    }
    let pieces = p.pieces();
    let x_heap = pick(&p.table().x_heap, p.local_rank);
    let t0 = item * p.chunk_tokens;
    let t1 = (t0 + p.chunk_tokens).min(p.tokens);
    let at = |i: u32| {
        let (r, pc) = row_piece(p, i);
        let (off, len) = p.piece(pc);
        ((t0 + r) as u64 * p.row_bytes() + off, len)
    };
    let moved = ring.gather(
        (t1 - t0) * pieces,
        |i| Some((p.x + at(i).0, at(i).1)),
        |i, stage| bulk_store(x_heap + at(i).0, stage, at(i).1),
        b,
        item,
    );
    if moved && last_arriver(tb.at(MoeScratch::X_COUNTER), p.x_items(), epoch) {
        signal((p.flags() as *mut u32).add(p.xready_flag() as usize), epoch);
        if trace::ON {
            trace::stamp(epoch, trace_ev::X_READY, block_idx_x(), 0, 0);
        }
        if !compute_copies_x(p) {
            send_tokens(p, b, epoch);
        }
    }
}

/// Thread 0 of the last `x_heap` copy (of router CTA 0 after [`ship`] when the compute CTAs
/// copy: [`compute_copies_x`]): this rank's tokens, once per other node, to the rank
/// there that shares this local rank (into its `rx`, raising `rxready[me]` there); that rank's
/// node peers pull them over NVLink.
///
/// # Safety
/// The file's contract; called once per launch, after this rank's tokens are all in `x_heap`.
#[inline(always)]
unsafe fn send_tokens(p: &MoeParams, b: &Bound, epoch: u32) {
    let my_node = div_nz(p.rank, p.local_world);
    for n in 0..p.nodes() {
        if n == my_node {
            continue;
        }
        let q = n * p.local_world + p.local_rank;
        if p.tokens == 0 {
            if !signal_rank(p, b, q, p.rxready_flag(p.rank), epoch) {
                return;
            }
            continue;
        }
        let cmd = FifoCmd {
            header: FifoCmd::header_word(OP_WRITE, 1, q, 0),
            src: FifoCmd::loc(BUF_HEAP, p.x_heap_off),
            dst: FifoCmd::loc(BUF_HEAP, p.rx_off + p.rx_at(p.rank)),
            bytes: p.tokens as u64 * p.row_bytes(),
            flag: FifoCmd::loc(BUF_HEAP, p.flags_off + 4 * p.rxready_flag(p.rank) as u64),
            flag_value: epoch as u64,
            ..Default::default()
        };
        if !push(p, b, cmd, q) {
            return;
        }
    }
}

/// The compute CTAs' gate: a tile waits until its tile row of `xe` holds every row it will
/// have; its expert picks the weights.
struct RowGate<'a, const GATHER: bool> {
    p: &'a MoeParams,
    tb: Tables,
    wait: bool,
    /// The launch's epoch (thread 0, the producer, holds it): for the `trace` feature's stamps.
    epoch: u32,
}

impl<const G: bool> InputGate for RowGate<'_, G> {
    const GATHER: bool = G;
    // A gathering producer's eight row addresses a thread spill at 40 registers. On the static
    // walk 56 had made the DeepSeek-like `[E, H, I]` GEMM 21-33% slower (L2 hit rate 49% -> 42%;
    // PERF.md, 2026-11-25); on the drawn walk it is 1-5% faster (twenty-ninth session).
    const WIDE_PRODUCER: bool = G;
    // The laid-out form's spare warps may move rows ([`MOE_SIDE_PULL`]).
    const SIDE: bool = !G;

    #[inline(always)]
    unsafe fn side(&self, smem: u32, t: u32) {
        let p = self.p;
        if p.mode == MOE_FUSED && p.flags & MOE_SIDE_PULL != 0 {
            side_pull(p, &self.tb, smem, t);
        }
    }

    #[inline(always)]
    fn trace_epoch(&self) -> u32 {
        self.epoch
    }

    #[inline(always)]
    unsafe fn a_row(&self, tile: Tile, r: u32) -> u64 {
        let (p, l) = (self.p, self.tb.l);
        let row = tile.m * TILE_M + r;
        let e = self.tb.get(l.m_expert + tile.m);
        // Padding rows (their table entries are written after the layout flag): zeros.
        if row >= self.tb.get(l.expert_off + e) + self.tb.get(l.expert_rows + e) {
            return 0;
        }
        let info = *(p.rows as *const MoeRow).add(row as usize);
        if info.src_rank as u32 == p.rank {
            p.x + info.token as u64 * p.row_bytes()
        } else {
            p.xe + row as u64 * p.row_bytes()
        }
    }

    #[inline(always)]
    fn a_any(&self) -> u64 {
        self.p.xe
    }

    #[inline(always)]
    unsafe fn wait(&self, tile: Tile) -> Result<(), GaveUp> {
        if !self.wait {
            return Ok(());
        }
        let p = self.p;
        let l = self.tb.l;
        let bound =
            Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: Role::Compute as u32 };
        let target = self.tb.get(l.m_target + tile.m);
        let r = bound.flag(self.tb.at(l.m_count + tile.m), target, tile.index);
        // The rows were written by other CTAs (bulk copies, or the side threads' plain stores);
        // TMA loads read them next.
        fence_proxy_async_global();
        r.map_err(|_| GaveUp)
    }

    #[inline(always)]
    fn b_row0(&self, tile: Tile) -> u32 {
        // SAFETY: the tile row is one the layout assigned (m_expert covers every used tile row).
        unsafe { self.tb.get(self.tb.l.m_expert + tile.m) * self.p.b_rows_per_expert }
    }
}

/// Whether the pull CTAs claim tiles after the pull ([`MOE_JOIN`]): fused launches only.
#[inline(always)]
fn joins(p: &MoeParams) -> bool {
    p.mode == MOE_FUSED && p.flags & MOE_JOIN != 0
}

/// How many k-blocks before a tile's last load a drawing producer claims its next tile
/// (`TileScheduler::claim_ahead`; AllGather + GEMM's default).
const CLAIM_AHEAD: u32 = 4;

/// The launch's tile walk (the grouped order, drawn from the tile counters by the compute CTAs
/// and, with [`MOE_JOIN`], the pull CTAs) and the CTAs that draw it. Rebuilt from the
/// parameters at each use: a value live across the engine's register reallocation spills in
/// the producer.
#[inline(always)]
fn walk(p: &MoeParams, tb: &Tables) -> (Claimed<GroupedTiles>, u32) {
    let l = tb.l;
    let sched = GroupedTiles {
        group_off: tb.at(l.expert_off),
        tile_start: tb.at(l.tile_start),
        groups: p.local_experts,
        tile_m: TILE_M,
    };
    let roles = p.gemm.roles;
    let (counters, ctas) = if joins(p) {
        (tb.at(MoeScratch::TILE_COUNTERS), roles.compute + roles.intra_comm)
    } else {
        (core::ptr::null_mut(), roles.compute)
    };
    (Claimed { inner: sched, counters, ahead: CLAIM_AHEAD, join: (u32::MAX, 0) }, ctas)
}

/// Run the grouped GEMM's tiles on this CTA (every thread): a compute CTA, or a pull CTA that
/// joins them ([`MOE_JOIN`]).
///
/// # Safety
/// The layout of this launch is out (or `MOE_GEMM_ONLY`'s last one is); the CTA's shared memory
/// is free for the engine.
#[inline(always)]
unsafe fn tiles<const TRANS_B: u32, const GATHER: bool>(p: &MoeParams, tb: Tables, epoch: u32) {
    if thread_idx_x() == 0 {
        // For the side threads (`side_pull`), read after the engine's first block barrier.
        st_shared_u32(side_smem() + SIDE_EPOCH, epoch);
    }
    let b = Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: Role::Compute as u32 };
    let gate = RowGate::<GATHER> { p, tb, wait: p.mode != MOE_GEMM_ONLY, epoch };
    let (walk, ctas) = walk(p, &tb);
    store_c_cta::<TRANS_B, _, _>(&p.gemm, &walk, &gate, ctas, b);
}

/// Thread 0 of a CTA counted among the drawing ones that runs no tile (its wait gave up, or its
/// shared memory cannot take the engine): count it done drawing.
///
/// # Safety
/// Once per CTA and launch, instead of [`tiles`].
#[inline(always)]
unsafe fn forfeit_tiles(p: &MoeParams, tb: &Tables) {
    let (walk, ctas) = walk(p, tb);
    Feed::forfeit(&walk, ctas);
}

/// The kernel body: every CTA takes its role from its index.
///
/// # Safety
/// The file's contract; every thread of the grid calls it, every CTA resident at once (compute
/// CTAs wait on the pull CTAs).
#[inline(always)]
unsafe fn moe<const TRANS_B: u32, const GATHER: bool>(p: &MoeParams) {
    let tid = thread_idx_x();
    let roles = p.gemm.roles;
    let gemm_only = p.mode == MOE_GEMM_ONLY;
    // Only thread 0 of a CTA waits on or raises flags, so only it needs the epoch; the grouped
    // GEMM alone touches no flag and leaves the epoch alone.
    let epoch = if tid == 0 && !gemm_only { launch_epoch(p.launches as *mut u64, roles.total()) } else { 0 };
    let bound =
        |role: Role| Bound { timeout_ns: p.gemm.timeout_ns, diag: &p.gemm.diag, rank: p.rank, role: role as u32 };
    let tb = Tables::of(p);
    let role = roles.role_of(block_idx_x());
    if trace::ON && tid == 0 {
        trace::start(epoch, role, p.rank);
    }
    match role {
        Some((Role::Compute, ci)) => {
            let scratch = dyn_smem_base() + crate::kernels_info::gemm::SCRATCH_OFF;
            let early_x = compute_copies_x(p);
            // Thread 0's ring, for the early copies and the help after the layout.
            let mut ring = if tid == 0 && early_x { Some(BulkRing::new(dyn_smem_base())) } else { None };
            if let Some(ring) = ring.as_mut() {
                // The layout is tens of microseconds away (routing, then every rank's counts),
                // and the peers' first tiles wait for these rows: copy this CTA's share now.
                let mut first = true;
                for item in (ci..p.x_items()).step_by(roles.compute as usize) {
                    copy_x(p, &tb, item, epoch, &bound(Role::Compute), ring, &mut first);
                }
            }
            if tid == 0 {
                let ok = gemm_only || bound(Role::Compute).flag(tb.at(MoeScratch::LAYOUT_FLAG), epoch, 0).is_ok();
                st_shared_u32(scratch, ok as u32);
            }
            sync_threads();
            if ld_shared_u32(scratch) == 0 {
                if tid == 0 {
                    forfeit_tiles(p, &tb);
                }
                return; // no layout: the wait reported why
            }
            if early_x {
                if p.flags & MOE_COMPUTE_HELPS != 0 {
                    // Until its first tile's rows are in, this CTA moves rows too: early on the
                    // GEMM waits for the pull (a token's rows fill all its experts at once).
                    // Its first tile: that of its static walk, about the position it draws
                    // first when the CTAs draw.
                    let (sched, _) = walk(p, &tb);
                    let mut first_walk = TileIter::new(block_idx_x(), roles.compute, sched.count());
                    let first = first_walk.next().map_or(u32::MAX, |i| sched.tile(i).m);
                    pull(p, &tb, Puller::Helper { first }, epoch, &bound(Role::Compute), ring.as_mut());
                }
                // The GEMM's set-up reuses the ring's shared memory.
                if !BulkRing::hand_over(ring, scratch) {
                    if tid == 0 {
                        forfeit_tiles(p, &tb);
                    }
                    return; // a wait gave up mid-copy (reported): the ring's memory is not free
                }
            }
            tiles::<TRANS_B, GATHER>(p, tb, epoch);
            if trace::ON && tid == 0 {
                // The producer's last tile claimed and loaded: about a tile before the CTA ends.
                trace::stamp(epoch, trace_ev::END, block_idx_x(), 0, 0);
            }
        }
        Some((Role::IntraComm, idx)) if !gemm_only => {
            let b = bound(Role::IntraComm);
            if p.engines() && idx == roles.intra_comm - 1 && tid == 0 {
                // Before its routing: the copy engines may start as soon as every peer's `done`
                // is in (the flags `ship` waits for again after routing).
                engines_go(p, epoch, &b);
            }
            let ring_base = dyn_smem_base();
            let mut ring = if tid == 0 { Some(BulkRing::new(ring_base)) } else { None };
            let routed = route(p, &tb, idx, epoch, &b);
            if trace::ON && tid == 0 {
                trace::stamp(epoch, trace_ev::ROUTED, block_idx_x(), idx, 0);
            }
            let shipped = ship(p, &tb, idx, routed, epoch, &b, ring.as_mut());
            if trace::ON && tid == 0 && shipped {
                trace::stamp(epoch, trace_ev::SHIPPED, block_idx_x(), idx, 0);
            }
            if idx == 0 {
                lay_out(p, &tb, epoch, &b);
            } else {
                if tid == 0 {
                    let ok = b.flag(tb.at(MoeScratch::LAYOUT_FLAG), epoch, 0).is_ok();
                    st_shared_u32(dyn_smem_base() + VERDICT_SMEM, ok as u32);
                }
                sync_threads();
                if ld_shared_u32(dyn_smem_base() + VERDICT_SMEM) == 0 {
                    if tid == 0 && joins(p) {
                        forfeit_tiles(p, &tb);
                    }
                    return; // no layout this launch: the wait reported why
                }
            }
            pull(p, &tb, Puller::Pull { ctas: roles.intra_comm }, epoch, &b, ring.as_mut());
            if joins(p) {
                // No pull item left: take tiles where the walk is, unless a timed-out copy may
                // still land in the shared memory.
                if BulkRing::hand_over(ring.take(), dyn_smem_base() + VERDICT_SMEM) {
                    tiles::<TRANS_B, GATHER>(p, tb, epoch);
                } else if tid == 0 {
                    forfeit_tiles(p, &tb);
                }
            }
            if tid == 0 && p.nodes() > 1 {
                // The proxy's WRITEs read the outbox and `x_heap`, which the next launch rewrites
                // from its start: this launch ends after they did.
                let _ = fifo_quiet_claimed(&p.fifo, &b, p.rank);
            }
            if trace::ON && tid == 0 {
                trace::stamp(epoch, trace_ev::END, block_idx_x(), 0, 0);
            }
        }
        _ => {}
    }
}

/// The MoE kernel, rows laid out.
#[inline(always)]
unsafe fn moe_laid_out<const TRANS_B: u32>(p: &MoeParams) {
    moe::<TRANS_B, false>(p);
}

/// The MoE kernel, own tokens gathered ([`MOE_GATHER`]).
#[inline(always)]
unsafe fn moe_gathered<const TRANS_B: u32>(p: &MoeParams) {
    moe::<TRANS_B, true>(p);
}

b_layout_entry_points! {
    MoeParams => moe_laid_out;
    /// MoE dispatch + grouped GEMM, experts' weights `[E/W, H, I]` (B `[K, N]` per expert).
    kn: mk_moe_kn;
    /// MoE dispatch + grouped GEMM, experts' weights `[E/W, I, H]` (B `[N, K]` per expert).
    nk: mk_moe_nk
}

b_layout_entry_points! {
    MoeParams => moe_gathered;
    /// MoE dispatch + grouped GEMM reading this rank's own tokens where they are
    /// ([`MOE_GATHER`]), weights `[E/W, H, I]`.
    kn: mk_moe_gather_kn;
    /// The same with weights `[E/W, I, H]`.
    nk: mk_moe_gather_nk
}
