//! Property tests (proptest, inside `cargo test`) of the attention kernels' tile geometry
//! (`mkernel::attn_tiles`, the code the GPU runs), against a brute force over every row and key:
//! under random lengths, head dimensions, masks and ring shards (contiguous or zigzag, the query
//! and key shards of any two ranks), each row's visible keys are the prefix `visible_keys` says,
//! a tile's key blocks cover every key one of its rows sees and no block past them, and
//! `first_masked_block` is the first block some real row of the tile cannot see in full (the
//! consumers mask from there on and skip the mask before it). The tile order covers every
//! (batch, head, query block) once, a query head reads the key/value head of its group, and each
//! launch's tickets name every unit once, then the end once per CTA.
use mkernel::abi::{AttnParams, SeqPos};
use mkernel::attention::{block_m, BLOCK_N};
use mkernel::attn_tiles::{Geometry, Units};
use proptest::prelude::*;

/// Positions of a shard: the whole sequence, or rank `rank`'s rows among `world` (zigzag or not).
fn positions(shard: Option<(u32, u32, bool)>, chunk: u32) -> SeqPos {
    match shard {
        None => SeqPos::IDENTITY,
        Some((rank, world, zigzag)) => SeqPos::shard(rank, world, chunk, zigzag),
    }
}

/// A random case: (d, causal, batch, heads, seq_q, seq_k, q positions, k positions).
fn case() -> impl Strategy<Value = (u32, bool, u32, u32, u32, u32, SeqPos, SeqPos)> {
    let plain = (prop_oneof![Just(64u32), Just(128)], any::<bool>(), 1u32..3, 1u32..4, 1u32..700, 1u32..700)
        .prop_map(|(d, causal, b, h, sq, sk)| (d, causal, b, h, sq, sk, SeqPos::IDENTITY, SeqPos::IDENTITY));
    // A ring step: rank `r` holds the queries, rank `s` the keys, `chunk` rows per chunk.
    let ring =
        (prop_oneof![Just(64u32), Just(128)], any::<bool>(), 1u32..5, 0u32..5, 0u32..5, 1u32..400, any::<bool>())
            .prop_map(|(d, causal, world, r, s, chunk, zigzag)| {
                let (r, s) = (r % world, s % world);
                let rows = if zigzag { 2 * chunk } else { chunk };
                let (q, k) = (positions(Some((r, world, zigzag)), chunk), positions(Some((s, world, zigzag)), chunk));
                (d, causal, 1, 2, rows, rows, q, k)
            });
    prop_oneof![plain, ring]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn visible_keys_blocks_and_masks_match_a_brute_force(
        (d, causal, batch, heads, seq_q, seq_k, q_pos, k_pos) in case()
    ) {
        let p = AttnParams {
            batch, heads, heads_kv: heads, seq_q, seq_k, causal: causal as u32, q_pos, k_pos,
            ..Default::default()
        };
        let g = Geometry::new(&p, d);
        let bm = block_m(d);
        let m_blocks = seq_q.div_ceil(bm);
        prop_assert_eq!(g.tiles(), m_blocks * heads * batch);
        let sees = |row: u32, key: u32| key < seq_k && (!causal || k_pos.at(key) <= q_pos.at(row));
        for mb in 0..m_blocks {
            let rows = mb * bm..(mb * bm + bm).min(seq_q);
            let mut most = 0;
            for row in rows.clone() {
                let lim = g.visible_keys(row);
                prop_assert!(lim <= seq_k);
                // A prefix: every key before the limit seen, none from it on.
                for key in 0..seq_k + BLOCK_N {
                    prop_assert_eq!(sees(row, key), key < lim, "row {} key {} limit {}", row, key, lim);
                }
                most = most.max(lim);
            }
            prop_assert_eq!(g.kv_blocks(mb), most.div_ceil(BLOCK_N), "tile {}", mb);
            let first = g.first_masked_block(mb);
            // Blocks before `first`: every key seen by every real row of the tile (no mask needed).
            let block = |j: u32| j * BLOCK_N..j * BLOCK_N + BLOCK_N;
            for j in 0..first {
                for row in rows.clone() {
                    prop_assert!(block(j).all(|key| sees(row, key)), "tile {} block {}", mb, j);
                }
            }
            // Block `first`, if the tile reads it: some key hidden from some real row.
            if first < g.kv_blocks(mb) {
                let hidden = rows.clone().any(|row| block(first).any(|key| !sees(row, key)));
                prop_assert!(hidden, "tile {} block {} needs no mask", mb, first);
            }
        }
        // The tile order: every (batch, head, query block) once.
        let mut seen = vec![false; g.tiles() as usize];
        for i in 0..g.tiles() {
            let w = g.work(i);
            prop_assert!(w.mb < m_blocks && w.h < heads && w.b < batch);
            let at = ((w.b * heads + w.h) * m_blocks + w.mb) as usize;
            prop_assert!(!seen[at], "tile {} twice", i);
            seen[at] = true;
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn key_value_heads_serve_whole_groups(kv_heads in 1u32..9, group in 1u32..9) {
        let heads = kv_heads * group;
        let p = AttnParams { batch: 1, heads, heads_kv: kv_heads, seq_q: 1, seq_k: 1, ..Default::default() };
        let g = Geometry::new(&p, 128);
        for h in 0..heads {
            prop_assert_eq!(g.kv_head(h), h / group);
        }
    }

    #[test]
    fn tickets_name_each_unit_once_per_launch(
        tiles in 1u32..300, steps in 1u32..5, split in 0u32..400, ctas in 1u32..140, launches in 1u32..4
    ) {
        let units = Units::new(tiles, steps, split);
        // The counter is never reset: launch e's tickets follow launch e - 1's.
        let mut ticket = 0u32;
        for epoch in 1..=launches {
            let mut seen = vec![false; units.total as usize];
            for _ in 0..units.total + ctas {
                let u = units.of_ticket(ticket, epoch, ctas);
                ticket += 1;
                if u == Units::END {
                    continue;
                }
                prop_assert!(u < units.total && !seen[u as usize], "launch {}: unit {} twice or too far", epoch, u);
                seen[u as usize] = true;
            }
            prop_assert!(seen.iter().all(|&x| x), "launch {}: a unit was never handed out", epoch);
        }
    }

    /// Every (tile, step) is covered by exactly one unit; a split tile's steps come in order of
    /// the units (so step s - 1's unit is claimed first, its running output written before step
    /// s merges it); whole units cover every step and come after every split unit.
    #[test]
    fn units_cover_every_tile_and_step_once(tiles in 1u32..200, steps in 1u32..9, split in 0u32..250) {
        let units = Units::new(tiles, steps, split);
        let mut covered = vec![vec![u32::MAX; steps as usize]; tiles as usize];
        let mut last_split_unit = None;
        for u in 0..units.total {
            let sp = units.span(u);
            prop_assert!(sp.tile < tiles && sp.first < sp.end && sp.end <= steps, "unit {} -> {:?}", u, sp);
            let whole = sp.first == 0 && sp.end == steps;
            if sp.end - sp.first == 1 && (!whole || sp.tile < units.split) {
                prop_assert!(sp.tile < units.split, "a stepped unit of tile {} past the split", sp.tile);
                last_split_unit = Some(u);
            } else {
                prop_assert!(sp.tile >= units.split && whole, "unit {}: {:?}", u, sp);
                prop_assert!(last_split_unit.is_none_or(|l| l < u));
            }
            for s in sp.first..sp.end {
                prop_assert_eq!(covered[sp.tile as usize][s as usize], u32::MAX, "tile {} step {} twice", sp.tile, s);
                if s > 0 && sp.first == s {
                    // The unit before it in the tile's walk was handed out earlier.
                    prop_assert!(covered[sp.tile as usize][s as usize - 1] < u);
                }
                covered[sp.tile as usize][s as usize] = u;
            }
        }
        prop_assert!(covered.iter().all(|t| t.iter().all(|&u| u != u32::MAX)));
        prop_assert_eq!(units.total, steps * split.min(tiles) + tiles - split.min(tiles));
    }
}
