//! Property tests (proptest, inside `cargo test`) of the tile schedulers' index math, which the
//! GPU kernels and the host share (`mkernel::sched`), on random shapes, splits, CTA counts and
//! ranks: every unit of work is covered exactly once, partial slots and arrival counts agree,
//! reduce-scatter owners only reach a tile after every source sent it, the MoE's grouped tiles
//! come group by group in the order rows fill in, AllGather + GEMM's local copy covers the shard
//! once, and so do its spread copies' units (each chunk's counted as its flag expects), a static
//! walk joined late walks every tile once, a stream-K tail after whole waves covers every k-block
//! once, a group of tile rows taller than the grid (any `group_m` an option may hold) walks as
//! the grid does, in the GEMM's walk and in the reduce-scatter's bands; and of the GEMM's
//! tile width and split-K choices, which must never ask for more than the GPU can hold at once.
use mkernel::abi::{AgGemmParams, GemmRsParams};
use mkernel::gemm::{
    default_split_k, default_tile_n, mma_cost, stream_estimate, BLayout, GemmShape, MAX_SPLIT_K, TILE_K, TILE_M,
    TILE_N, TILE_WIDTHS, WAVE_WIDTHS,
};
use mkernel::sched::{
    GroupedRaster, GroupedTiles, KSplit, OwnerTiles, RowOrder, SplitK, StreamK, TailSplit, TileGrid, TileIter,
    TileScheduler,
};
use proptest::prelude::*;

/// Every (tile, k-block) of `grid` x `k_blocks` covered once by `s`'s non-empty units; each
/// unit's (tile, slot) inside the tile's arrival count; each tile's units exactly that count.
fn check_k_split<S: TileScheduler + KSplit>(s: &S, grid: TileGrid, k_blocks: u32) -> Result<(), TestCaseError> {
    let tiles = grid.count();
    let mut seen = vec![0u8; (tiles * k_blocks) as usize];
    let mut units = vec![0u32; tiles as usize];
    let mut slots = vec![Vec::new(); tiles as usize];
    for u in 0..s.count() {
        let (kb0, kb1) = s.k_range(u, k_blocks);
        prop_assert!(kb0 <= kb1 && kb1 <= k_blocks);
        if kb0 == kb1 {
            prop_assert!(S::MAY_BE_EMPTY, "unit {} is empty", u);
            continue;
        }
        let t = s.tile(u);
        let (tile, slot) = s.unit(u);
        prop_assert_eq!(grid.coords(tile), (t.m, t.n));
        prop_assert!(slot < s.arrivals(tile) && s.arrivals(tile) <= s.slots());
        units[tile as usize] += 1;
        slots[tile as usize].push((slot, kb0));
        for kb in kb0..kb1 {
            seen[(tile * k_blocks + kb) as usize] += 1;
        }
    }
    prop_assert!(seen.iter().all(|&c| c == 1));
    for t in 0..tiles {
        prop_assert_eq!(units[t as usize], s.arrivals(t));
        // Slots follow k order: the sum in slot order is the sum in k order.
        let mut by_slot = slots[t as usize].clone();
        by_slot.sort();
        prop_assert!(by_slot.windows(2).all(|w| w[0].1 < w[1].1 && w[0].0 < w[1].0));
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    #[test]
    fn a_static_walk_joined_late_walks_every_tile_once(
        early in 1u32..140, late in 0u32..20, wave in 0u32..40, end in 0u32..6000,
    ) {
        let walkers = early + late;
        let switch = wave * early;
        let mut seen = vec![0u8; end as usize];
        for w in 0..walkers {
            let mut last = None;
            for t in TileIter::joined(w, early, walkers, end, switch) {
                prop_assert!(last.is_none_or(|l| l < t), "walker {} goes back to {}", w, t);
                // Late walkers stay out of the early walkers' part.
                prop_assert!(w < early || t >= switch, "late walker {} at {} before {}", w, t, switch);
                seen[t as usize] += 1;
                last = Some(t);
            }
        }
        prop_assert!(seen.iter().all(|&n| n == 1), "a tile walked {:?} times", seen.iter().find(|&&n| n != 1));
        // Before the switch, the early walkers' plain walk.
        for w in 0..early {
            let a = TileIter::joined(w, early, walkers, end, switch).take_while(|&t| t < switch);
            let b = TileIter::new(w, early, end).take_while(|&t| t < switch);
            prop_assert!(a.eq(b));
        }
    }

    #[test]
    fn split_k_units_cover_each_k_block_once(
        m in 1u32..2000, n in 1u32..4000, k_blocks in 1u32..300, splits in 1u32..=32, group_m in 1u32..10,
    ) {
        let splits = splits.min(k_blocks);
        let grid = TileGrid::new(m, n, TILE_M, TILE_N, group_m);
        check_k_split(&SplitK { grid, splits }, grid, k_blocks)?;
    }

    #[test]
    fn stream_k_ranges_cover_each_k_block_once_evenly(
        m in 1u32..1500, n in 1u32..9000, k_blocks in 1u32..300, extra in 0u32..200, group_m in 1u32..10,
    ) {
        let grid = TileGrid::new(m, n, TILE_M, TILE_N, group_m);
        let ctas = grid.count() + extra;
        let s = StreamK::new(grid, k_blocks, ctas);
        check_k_split(&s, grid, k_blocks)?;
        // No CTA does more than its share.
        let mut work = vec![0u32; ctas as usize];
        for u in 0..s.count() {
            let (kb0, kb1) = s.k_range(u, k_blocks);
            work[(u % ctas) as usize] += kb1 - kb0;
        }
        prop_assert!(work.iter().all(|&w| w <= s.len));
    }

    #[test]
    fn tail_split_runs_whole_waves_then_cuts_the_rest_once(
        m in 1u32..5000, n in 1u32..9000, k_blocks in 1u32..300, ctas in 1u32..200, group_m in 1u32..10,
    ) {
        let grid = TileGrid::new(m, n, TILE_M, TILE_N, group_m);
        let s = TailSplit::new(GroupedRaster(grid), grid, k_blocks, ctas, true);
        let tiles = grid.count();
        let position: std::collections::HashMap<(u32, u32), u32> = (0..tiles).map(|i| (grid.coords(i), i)).collect();
        // Whole waves only, and a tail of fewer tiles than walkers (none when they divide).
        prop_assert!(s.dp.is_multiple_of(ctas) && s.dp <= tiles && tiles - s.dp < ctas);
        prop_assert_eq!(s.dp == tiles, tiles.is_multiple_of(ctas));
        let mut seen = vec![0u8; (tiles * k_blocks) as usize];
        let mut units = vec![0u32; tiles as usize];
        let mut work = vec![0u32; ctas as usize];
        for u in 0..s.count() {
            let (kb0, kb1) = s.k_range(u, k_blocks);
            let t = s.tile(u);
            prop_assert_eq!(t.index, u);
            let at = position[&(t.m, t.n)];
            if u < s.dp {
                prop_assert!(s.whole(u) && (kb0, kb1) == (0, k_blocks) && at == u);
            } else {
                prop_assert!(!s.whole(u));
                if kb0 == kb1 {
                    continue;
                }
                let (tt, slot) = s.unit(u);
                prop_assert_eq!(s.dp + tt, at);
                prop_assert!(slot < s.arrivals(tt) && s.arrivals(tt) <= s.slots());
                units[at as usize] += 1;
                work[((u - s.dp) % ctas) as usize] += kb1 - kb0;
            }
            for kb in kb0..kb1 {
                seen[(at * k_blocks + kb) as usize] += 1;
            }
        }
        prop_assert!(seen.iter().all(|&c| c == 1));
        for t in s.dp..tiles {
            prop_assert_eq!(units[t as usize], s.arrivals(t - s.dp));
        }
        // The tail's k-blocks are spread evenly: no walker does more than its share.
        prop_assert!(work.iter().all(|&w| w <= s.tail.len));
        // Not wanted: every tile whole.
        prop_assert_eq!(TailSplit::new(GroupedRaster(grid), grid, k_blocks, ctas, false).dp, tiles);
    }

    #[test]
    fn arrival_tail_cuts_the_last_rows_of_the_table_into_ways_once(
        m in 1u32..5000, n in 1u32..9000, k_blocks in 1u32..300, ways in 2u32..=8, group_m in 1u32..10,
        tail_rows in 1u32..12, seed in any::<u64>(),
    ) {
        // AllGather + GEMM's arrival tail (`ops::ag_gemm::Tail::arrivals`): the table's last
        // `tail_rows` tile rows walked row by row after the grouped rest, their tiles cut into
        // tiles x ways k-ranges.
        let grid = TileGrid::new(m, n, TILE_M, TILE_N, group_m);
        let mut table: Vec<u32> = (0..grid.m_tiles).collect();
        // A permutation from the seed (the host's row order is one).
        let mut x = seed | 1;
        for i in (1..table.len()).rev() {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            table.swap(i, (x % (i as u64 + 1)) as usize);
        }
        let tail_rows = tail_rows.min(grid.m_tiles);
        let walk = RowOrder { grid, rows: table.as_ptr(), tail_rows };
        let tiles = tail_rows * grid.n_tiles;
        let count = grid.count();
        let s = TailSplit::at(walk, grid, k_blocks, tiles * ways, count - tiles);
        prop_assert_eq!(s.dp, count - tiles);
        let mut seen = vec![0u8; (count * k_blocks) as usize];
        let mut units = vec![0u32; count as usize];
        for u in 0..s.count() {
            let (kb0, kb1) = s.k_range(u, k_blocks);
            let t = s.tile(u);
            prop_assert_eq!(t.index, u);
            if u >= s.dp {
                // Only the tail rows, in table order.
                let (p, _) = walk.coords(s.dp + s.tail.segment(u - s.dp).0);
                prop_assert!(p >= grid.m_tiles - tail_rows);
                prop_assert_eq!(t.m, table[p as usize]);
            }
            if kb0 == kb1 {
                continue; // an empty stream-K unit
            }
            let at = (t.m * grid.n_tiles + t.n) as usize;
            if u < s.dp {
                prop_assert_eq!((kb0, kb1), (0, k_blocks));
            } else {
                // No range longer than a way's share of a tile (rounded up).
                prop_assert!(kb1 - kb0 <= k_blocks.div_ceil(ways));
                let (tt, slot) = s.unit(u);
                prop_assert!(slot < s.arrivals(tt) && s.arrivals(tt) <= s.slots());
                units[at] += 1;
                let w = walk.tile(s.dp + tt);
                prop_assert_eq!((w.m, w.n), (t.m, t.n));
                prop_assert_eq!(units[at] <= s.arrivals(tt), true);
            }
            for kb in kb0..kb1 {
                seen[at * k_blocks as usize + kb as usize] += 1;
            }
        }
        prop_assert!(seen.iter().all(|&c| c == 1));
        for tt in 0..tiles {
            let w = walk.tile(s.dp + tt);
            prop_assert_eq!(units[(w.m * grid.n_tiles + w.n) as usize], s.arrivals(tt));
        }
    }

    #[test]
    fn owner_tiles_reach_an_own_tile_after_every_source_sent_it(
        rows in 1u32..1500, n in 1u32..3000, world in 1u32..=8, lead in 0u32..400,
    ) {
        let per = OwnerTiles::new(rows, n, (TILE_M, TILE_N), 8, world, 0, lead).per_owner();
        let lead = lead.min(per);
        let mut pos = vec![vec![vec![0u32; per as usize]; world as usize]; world as usize];
        for rank in 0..world {
            let s = OwnerTiles::new(rows, n, (TILE_M, TILE_N), 8, world, rank, lead);
            let mut seen = vec![false; (world * per) as usize];
            for i in 0..s.count() {
                let t = s.tile(i);
                let o = s.locate(t.m, t.n);
                let k = (o.owner * per + o.slot) as usize;
                prop_assert!(!seen[k]);
                seen[k] = true;
                pos[rank as usize][o.owner as usize][s.order(i).1 as usize] = i;
            }
            prop_assert!(seen.iter().all(|&x| x));
        }
        for (me, mine) in pos.iter().enumerate() {
            for theirs in pos.iter().enumerate().filter(|&(q, _)| q != me).map(|(_, p)| p) {
                for (&own, &sent) in mine[me].iter().zip(&theirs[me]) {
                    prop_assert!(own >= sent + lead.max(1));
                }
            }
        }
    }

    #[test]
    fn grouped_tiles_walk_groups_in_order_tile_rows_fastest(
        rows in prop::collection::vec(prop_oneof![Just(0u32), 1u32..700], 1..40), n_tiles in 1u32..12,
    ) {
        // The tables the MoE router writes: group offsets rounded up to the tile height, and
        // prefix sums of tiles.
        let (mut off, mut starts) = (vec![0u32], vec![0u32]);
        for r in &rows {
            let mt = r.div_ceil(TILE_M);
            off.push(off.last().unwrap() + mt * TILE_M);
            starts.push(starts.last().unwrap() + mt * n_tiles);
        }
        let groups = rows.len() as u32;
        let s = GroupedTiles { group_off: off.as_ptr(), tile_start: starts.as_ptr(), groups, tile_m: TILE_M };
        let m_total = off[groups as usize] / TILE_M;
        prop_assert_eq!(s.count(), m_total * n_tiles);
        let group_of_row = |m: u32| (0..groups as usize).find(|&g| off[g + 1] > m * TILE_M).unwrap();
        let mut seen = vec![false; (m_total * n_tiles) as usize];
        let mut last_group = 0usize;
        for i in 0..s.count() {
            let t = s.tile(i);
            prop_assert!(t.index == i && t.m < m_total && t.n < n_tiles, "{:?}", t);
            let k = (t.m * n_tiles + t.n) as usize;
            prop_assert!(!seen[k], "{:?} twice", t);
            seen[k] = true;
            // Groups in order; within one, tile rows fastest (the CTAs running at once share B
            // columns), the group's q-th tile at row q % rows, column q / rows.
            let g = group_of_row(t.m);
            prop_assert!(g >= last_group, "group {} after group {}", g, last_group);
            let (first, mt) = (off[g] / TILE_M, (off[g + 1] - off[g]) / TILE_M);
            let q = i - starts[g];
            prop_assert_eq!((t.m - first, t.n), (q % mt, q / mt));
            last_group = g;
        }
        prop_assert!(seen.iter().all(|&x| x));
    }

    #[test]
    fn default_splits_stay_within_one_wave(
        m in 1usize..20000, n in 1usize..60000, k in 1usize..70000, ctas in 1u32..200, kn: bool,
    ) {
        let shape = GemmShape { m, n: n.div_ceil(8) * 8, k: k.div_ceil(8) * 8 };
        let layout = if kn { BLayout::KN } else { BLayout::NK };
        let w = default_tile_n(shape, layout, ctas);
        prop_assert!(TILE_WIDTHS.contains(&w));
        if m > 256 {
            // Compute-bound: the widest, or a width that saves tensor-core work.
            prop_assert!(w == TILE_N || (WAVE_WIDTHS.contains(&w) && mma_cost(shape, w, 1, ctas) < mma_cost(shape, TILE_N, 1, ctas)),
                "{}x{}: {} columns at more than 256 rows", m, n, w);
        } else {
            // No width is estimated faster (each with its default split), nor as fast with
            // fewer bytes loaded.
            let cost = |w: u32| stream_estimate(shape, layout, w, default_split_k(shape, ctas, w), ctas);
            for other in TILE_WIDTHS {
                prop_assert!(cost(w) <= cost(other), "{}x{}x{}: {} columns cost more than {}", m, n, k, w, other);
            }
        }
        let tiles = (shape.m.div_ceil(TILE_M as usize) * shape.n.div_ceil(w as usize)) as u64;
        let k_blocks = shape.k.div_ceil(TILE_K as usize) as u64;
        let split = default_split_k(shape, ctas, w);
        prop_assert!((1..=MAX_SPLIT_K).contains(&split) && split as u64 <= k_blocks);
        prop_assert!(split == 1 || tiles * split as u64 <= ctas as u64, "{} tiles x {} > {} CTAs", tiles, split, ctas);
    }

    /// AllGather + GEMM's local copy (not in place, one node): the push CTAs' byte ranges of every
    /// chunk and the compute tiles' k-block shares of every local tile write each (row, k-block)
    /// of this rank's shard exactly once, whole rows only, whatever M / W, K, N and chunk size.
    #[test]
    fn ag_gemm_local_copy_covers_the_shard_once(
        world in 1u32..9, rank in 0u32..8, shard_rows in 1u32..2500, chunk_rows in 1u32..600,
        k in 1u32..700, n in 1u32..1300, from_tiles in any::<bool>(),
    ) {
        let mut p = AgGemmParams { world, rank: rank % world, shard_rows, chunk_rows, ..Default::default() };
        p.chunks = shard_rows.div_ceil(chunk_rows);
        (p.gemm.k, p.gemm.n, p.tiles_copy_local) = (k, n, from_tiles as u32);
        let (k_blocks, row_bytes) = (k.div_ceil(TILE_K), p.row_bytes());
        let mut seen = vec![0u8; (shard_rows * k_blocks) as usize];
        for c in 0..p.chunks {
            for (a, b) in p.local_copy_parts(c, TILE_M) {
                prop_assert!(a <= b && a % row_bytes == 0 && b % row_bytes == 0, "chunk {} copies {}..{}", c, a, b);
                for row in (a / row_bytes) as u32..(b / row_bytes) as u32 {
                    for kb in 0..k_blocks {
                        seen[(row * k_blocks + kb) as usize] += 1;
                    }
                }
            }
        }
        let mine = p.rank * shard_rows;
        for tm in 0..(world * shard_rows).div_ceil(TILE_M) {
            for tn in 0..n.div_ceil(TILE_N) {
                let Some((first, stride)) = p.local_copy_share(tm, tn, TILE_M, TILE_N) else { continue };
                prop_assert!(from_tiles && tm * TILE_M >= mine && (tm + 1) * TILE_M <= mine + shard_rows);
                for kb in (first..k_blocks).step_by(stride as usize) {
                    for row in tm * TILE_M - mine..(tm + 1) * TILE_M - mine {
                        seen[(row * k_blocks + kb) as usize] += 1;
                    }
                }
            }
        }
        prop_assert!(seen.iter().all(|&x| x == 1), "a (row, k-block) of the shard written {:?} times",
            seen.iter().find(|&&x| x != 1));
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// AllGather + GEMM's spread copies: the push CTAs' chunks and the spread units (chunk-major,
    /// each inside its chunk) cover every byte of the shard once, every spread chunk's units as
    /// many as `spread_chunk_units` says (what its last arriver counts to), and the compute CTAs'
    /// strided walk over them reaches every unit once.
    #[test]
    fn spread_units_cover_the_shard_once_chunk_by_chunk(
        shard_rows in 1u32..3000, chunk_rows in 1u32..700, k8 in 1u32..1200, unit16 in 1u32..9000,
        ctas in 1u32..133, push_every in prop_oneof![Just(0u32), 2u32..6],
    ) {
        let mut p = AgGemmParams { shard_rows, chunk_rows, spread_unit: 16 * unit16, spread: 2, spread_push_every: push_every, ..Default::default() };
        p.chunks = shard_rows.div_ceil(chunk_rows);
        p.gemm.k = 8 * k8;
        p.spread_every = 1;
        p.plan_spread(ctas);
        // Every byte once: the pushed chunks whole, the rest unit by unit, in chunk order.
        let mut seen = vec![0u8; (shard_rows as u64 * p.row_bytes() / 16) as usize];
        let mut per_chunk = vec![0u32; p.chunks as usize];
        for i in 0..p.pushed_chunks() {
            let c = p.pushed_chunk(i);
            prop_assert!(c < p.chunks && (push_every == 0 || c.is_multiple_of(push_every)));
            let (lo, hi) = p.chunk_bytes_range(c);
            (lo / 16..hi / 16).for_each(|v| seen[v as usize] += 1);
        }
        let mut last = (0u32, 0u64);
        for u in 0..p.spread_units() {
            let (c, lo, hi) = p.spread_unit_range(u);
            let (clo, chi) = p.chunk_bytes_range(c);
            prop_assert!(lo < hi && clo <= lo && hi <= chi, "unit {} is {}..{} of chunk {}", u, lo, hi, c);
            prop_assert!(lo.is_multiple_of(16) && hi.is_multiple_of(16) && (c, lo) >= last);
            (lo / 16..hi / 16).for_each(|v| seen[v as usize] += 1);
            per_chunk[c as usize] += 1;
            last = (c, hi);
        }
        prop_assert!(seen.iter().all(|&x| x == 1), "a 16-byte piece copied {:?} times", seen.iter().find(|&&x| x != 1));
        for c in 0..p.chunks {
            let pushed = push_every != 0 && c.is_multiple_of(push_every);
            prop_assert_eq!(per_chunk[c as usize], if pushed { 0 } else { p.spread_chunk_units(c) });
        }
        let walked: u32 = (0..ctas).map(|cta| (cta..p.spread_units()).step_by(ctas as usize).count() as u32).sum();
        prop_assert_eq!(walked, p.spread_units());
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// `group_m` is an option's value, up to `u32::MAX`: a group taller than the grid walks as
    /// the grid does (no `group_m x n_tiles` wrapping in 32 bits), every tile once, and the
    /// reduce-scatter's bands of an owner block cover its rows once.
    #[test]
    fn a_group_taller_than_the_grid_is_the_grid(
        m in 1u32..20_000, n in 1u32..100_000, group_m in prop_oneof![Just(u32::MAX), 1u32.., 1u32..200],
    ) {
        let grid = TileGrid::new(m, n, TILE_M, TILE_N, group_m);
        let whole = TileGrid::new(m, n, TILE_M, TILE_N, grid.m_tiles);
        prop_assert!(grid.group_m >= 1 && grid.group_m <= grid.m_tiles);
        let mut seen = vec![false; grid.count() as usize];
        for t in 0..grid.count() {
            let (tm, tn) = grid.coords(t);
            prop_assert!(tm < grid.m_tiles && tn < grid.n_tiles, "tile {} at ({}, {})", t, tm, tn);
            prop_assert!(!std::mem::replace(&mut seen[(tm * grid.n_tiles + tn) as usize], true));
            prop_assert_eq!(grid.index_of(tm, tn), t);
            if group_m >= grid.m_tiles {
                prop_assert_eq!((tm, tn), whole.coords(t));
            }
        }
        let (bands, band_tiles, rows_per_band) = GemmRsParams::band_shape(m, n, group_m);
        prop_assert!(rows_per_band >= 1 && rows_per_band <= grid.m_tiles);
        prop_assert_eq!(band_tiles, rows_per_band * grid.n_tiles);
        let mut p = GemmRsParams { rows: m, ..Default::default() };
        (p.gemm.n, p.gemm.group_m) = (n, group_m);
        prop_assert_eq!(p.bands(), bands);
        let mut next = 0;
        for b in 0..bands {
            let (lo, hi) = p.band_rows(b);
            prop_assert!(lo == next && lo < hi, "band {} covers rows {}..{} after {}", b, lo, hi, next);
            next = hi;
        }
        prop_assert_eq!(next, m);
    }
}
