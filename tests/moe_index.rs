//! Property tests (proptest, inside `cargo test`, no GPU) of the MoE kernel's index math, which
//! the device code and the host share (`mkernel::abi`), at every world size the op takes (up to
//! `MOE_MAX_WORLD` = 64 ranks): each token's leading slots (one per destination rank it reaches,
//! its lowest expert there), the pieces a row moves in, the router CTAs' shares of the records
//! they ship, and the per-world tables (flags, inbox counts and records, scratch) never
//! overlapping or leaving their buffers.
use mkernel::abi::{
    moe_lead_slots, MoeParams, MoeScratch, FLAG_STRIDE, MAX_LOCAL_RANKS, MOE_MAX_EXPERTS, MOE_MAX_TOP_K, MOE_MAX_WORLD,
    MOE_TILE_M,
};
use mkernel::comm::world::World;
use mkernel::ops::moe::check_world;
use mkernel_device::kernels_info::allgather::BULK_CHUNK;
use proptest::prelude::*;
use std::collections::BTreeMap;

const K: usize = MOE_MAX_TOP_K as usize;

/// A routing row: `top_k` distinct experts of `0..experts`, some slots ruled out (`u32::MAX`, as
/// the router marks a bad or repeated id), the rest of the array `u32::MAX`.
fn row(world: u32, local: u32, top_k: u32, seed: u64, ruled_out: u32) -> [u32; K] {
    let experts = world * local;
    let mut ex = [u32::MAX; K];
    let mut x = seed;
    let mut n = 0;
    while n < top_k as usize {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let e = ((x >> 33) % experts as u64) as u32;
        if !ex[..n].contains(&e) {
            ex[n] = e;
            n += 1;
        }
    }
    for (j, e) in ex.iter_mut().enumerate().take(top_k as usize) {
        if ruled_out & (1 << j) != 0 {
            *e = u32::MAX;
        }
    }
    ex
}

fn world(w: u32, nodes: u32) -> World {
    let mut x = World::single(0);
    x.world_size = w;
    x.local_world_size = w / nodes;
    x.nodes = nodes;
    x
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn lead_slots_name_each_destination_once_by_its_lowest_expert(
        w in 1u32..=MOE_MAX_WORLD, local in 1u32..=16, k in 1u32..=MOE_MAX_TOP_K, seed: u64, ruled_out: u32,
    ) {
        prop_assume!(w * local <= MOE_MAX_EXPERTS && k <= w * local);
        let ex = row(w, local, k, seed, ruled_out);
        let dst = ex.map(|e| if e == u32::MAX { u32::MAX } else { e / local });
        let leads = moe_lead_slots(&ex, &dst, k);
        // The reference: per destination rank, the token's lowest expert there.
        let mut lowest = BTreeMap::new();
        for &e in ex.iter().take(k as usize).filter(|&&e| e != u32::MAX) {
            let m = lowest.entry(e / local).or_insert(e);
            *m = (*m).min(e);
        }
        prop_assert_eq!(leads >> k, 0, "a slot past top_k leads");
        for (j, &e) in ex.iter().enumerate().take(k as usize) {
            let want = e != u32::MAX && lowest[&(e / local)] == e;
            prop_assert_eq!(leads & (1 << j) != 0, want, "slot {} (expert {}) of {:?}", j, e, &ex[..k as usize]);
        }
        // One record per destination reached, at most k of them whatever the world size.
        prop_assert_eq!(leads.count_ones() as usize, lowest.len());
    }

    #[test]
    fn record_shares_cover_a_destination_once_in_16_byte_multiples(
        r0 in 0u64..1 << 30,
        len in 0u64..1 << 22,
        routers in 1u32..=64,
    ) {
        // Every router CTA ships its share of a destination's records (`ship`): in CTA order,
        // back to back, each a multiple of 16 bytes but where the records end.
        let mut at = r0;
        for c in 0..routers {
            let (a, b) = MoeParams::record_share(r0, r0 + len, routers, c);
            prop_assert_eq!(a, at, "share {} does not start where share {} ended", c, c.wrapping_sub(1));
            prop_assert!(b >= a);
            prop_assert!((b - a) % 16 == 0 || b == r0 + len, "share {} is {} bytes", c, b - a);
            at = b;
        }
        prop_assert_eq!(at, r0 + len);
    }

    #[test]
    fn pieces_cover_a_row_once_in_bulk_copy_sizes(hidden in 1u32..200_000) {
        let hidden = hidden.div_ceil(8) * 8;
        let p = MoeParams { hidden, ..Default::default() };
        let mut at = 0u64;
        for pc in 0..p.pieces() {
            let (off, len) = p.piece(pc);
            prop_assert_eq!(off, at);
            prop_assert!(len > 0 && len <= BULK_CHUNK && len % 16 == 0, "piece {} is {} bytes", pc, len);
            at += len as u64;
        }
        prop_assert_eq!(at, p.row_bytes());
    }

    #[test]
    fn tables_stay_apart_at_any_world(
        w in 1u32..=MOE_MAX_WORLD, local in 1u32..=16, k in 1u32..=MOE_MAX_TOP_K, max_tokens in 1u32..5000,
        cap in 1u32..100_000, routers in 1u32..=64,
    ) {
        prop_assume!(w * local <= MOE_MAX_EXPERTS);
        let p = MoeParams { world: w, local_experts: local, top_k: k, max_tokens, ..Default::default() };
        // Flags: counts[w], done[w], xready, records[w], rxready[w], all distinct, in the buffer.
        let mut flags: Vec<u32> = (0..w).flat_map(|s| {
            [MoeParams::counts_flag(s), p.done_flag(s), p.records_flag(s), p.rxready_flag(s)]
        }).collect();
        flags.push(p.xready_flag());
        flags.sort();
        flags.dedup();
        prop_assert_eq!(flags.len() as u32, 4 * w + 1);
        prop_assert!(flags.iter().all(|&f| f % FLAG_STRIDE == 0 && f < MoeParams::flag_words(w)));
        // Inbox: every source's counts before the records, every source's records apart.
        let bytes = MoeParams::inbox_bytes(w, max_tokens, local, k);
        let rec = MoeParams::record_words(k) as u64 * 4;
        prop_assert!(p.counts_at(w - 1) + MoeParams::counts_words(local) as u64 * 4 <= MoeParams::records_off(w, local));
        prop_assert_eq!(MoeParams::records_off(w, local) % 16, 0);
        for s in 0..w {
            prop_assert_eq!(p.record_at(s, max_tokens), p.record_at(s, 0) + max_tokens as u64 * rec);
            // Every source's records start 16-byte aligned (bulk copies ship them), after the last's.
            prop_assert_eq!(p.record_at(s, 0) % 16, 0);
            if s > 0 {
                prop_assert!(p.record_at(s, 0) >= p.record_at(s - 1, max_tokens));
                prop_assert!(p.record_at(s, 0) < p.record_at(s - 1, max_tokens) + 16);
            }
        }
        prop_assert!(p.record_at(w - 1, max_tokens) <= bytes && bytes < p.record_at(w - 1, max_tokens) + 16);
        // Scratch: the flag words, then tables in order, each its documented length.
        let cap = cap.div_ceil(MOE_TILE_M) * MOE_TILE_M;
        let l = MoeScratch::new(local, w, cap, routers);
        let mt = cap / MOE_TILE_M;
        let tables = [
            (l.expert_off, local + 1),
            (l.expert_rows, local),
            (l.tile_start, local + 1),
            (l.recv_counts, w * local),
            (l.src_off, local * w),
            (l.items, w + 2),
            (l.m_expert, mt),
            (l.m_target, mt),
            (l.m_count, mt),
            (l.route_part, 2 * routers * local * w),
        ];
        // The router's words of its last CTA: the last of the scratch.
        let last = l.route_part_at(true, routers - 1, local * w - 1, routers, local * w);
        prop_assert_eq!(last + 1, l.words);
        let words = [MoeScratch::LAYOUT_FLAG, MoeScratch::FINISH_COUNTER, MoeScratch::X_COUNTER,
            MoeScratch::COUNTED_BARRIER, MoeScratch::RECORDS_BARRIER, MoeScratch::ITEM_COUNTER,
            MoeScratch::ITEMS_DONE];
        prop_assert!(words.windows(2).all(|p| p[1] >= p[0] + FLAG_STRIDE));
        let mut end = MoeScratch::ITEMS_DONE + 1;
        for (at, len) in tables {
            prop_assert!(at >= end, "table at {} overlaps the one ending at {}", at, end);
            end = at + len;
        }
        prop_assert_eq!(end, l.words);
    }
}

#[test]
fn world_bounds_are_typed_errors() {
    for (w, nodes) in [(1, 1), (2, 1), (8, 1), (8, 2), (12, 2), (16, 2), (32, 4), (64, 8)] {
        assert!(check_world(&world(w, nodes)).is_ok(), "{w} ranks on {nodes} nodes");
    }
    let rule = |w, nodes| match check_world(&world(w, nodes)) {
        Err(mkernel::Error::InvalidArgument { arg, rule }) => {
            assert_eq!(arg, "world");
            rule
        }
        other => panic!("{w} ranks on {nodes} nodes: expected a typed error, got {other:?}"),
    };
    assert!(rule(72, 9).contains(&format!("at most {MOE_MAX_WORLD} ranks")));
    assert!(rule(16, 1).contains(&format!("at most {MAX_LOCAL_RANKS}")));
    assert!(rule(128, 8).contains("ranks in all"));
}
