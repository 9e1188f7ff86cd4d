//! The several-node GEMM + ReduceScatter / AllReduce protocol's index math, on the CPU (the GPU
//! kernels and the host share it: `abi::GemmRsParams`, `sched::NodeMap`, `sched::NodeTiles`):
//! every rank's walk covers each tile once and reaches a tile it collects only after the node's
//! other ranks sent it their partials; every node partial goes where it is summed and each final
//! block sums every rank's partial exactly once (reduce-scatter at its owner, all-reduce on every
//! rank); FIFO WRITEs raise the flags their readers wait for; flags and staging slots never
//! overlap.
use mkernel::abi::{GemmRsParams, FLAG_STRIDE, HALF_TILE_BYTES};
use mkernel::gemm::{TILE_M, TILE_N};
use mkernel::sched::{NodeTiles, OwnerTiles, TileGrid, TileScheduler};
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

/// The parameters of rank `rank` (only what the index math reads).
fn params(
    rank: u32,
    world: u32,
    local_world: u32,
    all_reduce: bool,
    (rows, n): (u32, u32),
    group: u32,
) -> GemmRsParams {
    let mut p = GemmRsParams {
        rows,
        rank,
        world,
        local_rank: rank % local_world,
        local_world,
        all_reduce: all_reduce as u32,
        nodes: world / local_world,
        group,
        ..Default::default()
    };
    p.gemm.n = n;
    p
}

/// Layouts tried: (world, ranks per node).
const LAYOUTS: [(u32, u32); 9] = [(2, 1), (3, 1), (4, 1), (4, 2), (6, 2), (6, 3), (8, 2), (8, 4), (16, 8)];

#[test]
fn every_final_block_sums_every_rank_once() {
    for (world, lw) in LAYOUTS {
        for all_reduce in [false, true] {
            let p = |r| params(r, world, lw, all_reduce, (1000, 8), 3);
            // slots[(rank, qi, m)]: the ranks whose partials are in that node-partial slot.
            let mut slots: BTreeMap<(u32, u32, u32), BTreeSet<u32>> = BTreeMap::new();
            for r in 0..world {
                let map = p(r).node_map();
                // My node partial of each block I collect: this node's ranks.
                let node: BTreeSet<u32> = (0..lw).map(|l| map.node() * lw + l).collect();
                for b in 0..map.nodes {
                    let qi = map.collected_node(b);
                    let q = map.pair(qi);
                    assert!(map.collects(q) && map.block_node(q) == qi);
                    // Every rank of the node hands its partial of q to me.
                    for &s in &node {
                        assert_eq!(
                            p(s).node_map().collector(q),
                            map.local_rank(),
                            "world {world}/{lw}: rank {s}, block {q}"
                        );
                    }
                    assert!(slots.insert((r, qi, map.node()), node.clone()).is_none());
                    // Sent in collected order, the other nodes' blocks first.
                    let sent = b < map.sent_blocks(all_reduce);
                    assert_eq!(sent, map.dests(qi, all_reduce) > 0, "world {world}/{lw} rank {r} qi {qi}");
                    for k in 0..map.dests(qi, all_reduce) {
                        let d = map.dest(qi, k, all_reduce);
                        let dm = p(d).node_map();
                        assert!(dm.node() != map.node() && dm.local_rank() == map.local_rank() && dm.collects(q));
                        assert!(slots.insert((d, qi, map.node()), node.clone()).is_none(), "slot written twice");
                    }
                }
            }
            // What each rank's output holds, block by block: the ranks summed into it.
            let everyone: BTreeSet<u32> = (0..world).collect();
            for r in 0..world {
                let map = p(r).node_map();
                let finals = map.finals(all_reduce);
                // The finalised blocks, in their order, are the last `finals` collected ones.
                let order: BTreeSet<u32> = (0..finals).map(|b| map.finalised_node(b)).collect();
                let last: BTreeSet<u32> = (map.nodes - finals..map.nodes).map(|b| map.collected_node(b)).collect();
                assert_eq!((order.len() as u32, &order), (finals, &last), "world {world}/{lw} rank {r}");
                // Finalised in the order the other nodes' partials finish arriving: the last
                // position at which some other node's pair sends a block never goes down.
                let arrives = |qi: u32| {
                    (0..map.nodes)
                        .filter(|&m| m != map.node())
                        .map(|m| {
                            let pm = p(map.pair(m)).node_map();
                            (0..pm.sent_blocks(all_reduce)).position(|k| pm.collected_node(k) == qi).unwrap_or(0)
                        })
                        .max()
                        .unwrap_or(0)
                };
                let times: Vec<usize> = (0..finals).map(|b| arrives(map.finalised_node(b))).collect();
                assert!(times.windows(2).all(|w| w[0] <= w[1]), "world {world}/{lw} rank {r}: {times:?}");
                for b in 0..finals {
                    let qi = map.finalised_node(b);
                    let mut got = BTreeSet::new();
                    for m in 0..map.nodes {
                        let s = slots
                            .get(&(r, qi, m))
                            .unwrap_or_else(|| panic!("rank {r}: node {m}'s partial of {qi} missing"));
                        assert!(got.is_disjoint(s));
                        got.extend(s);
                    }
                    assert_eq!(got, everyone, "world {world}/{lw} rank {r} block {}", map.pair(qi));
                }
                if all_reduce {
                    // Blocks finalised elsewhere reach me from their collector on my node.
                    assert_eq!(finals, map.nodes);
                    for q in 0..world {
                        let c = map.node() * lw + map.collector(q);
                        let cm = p(c).node_map();
                        assert!(cm.collects(q) && cm.finals(true) == cm.nodes);
                    }
                } else {
                    assert_eq!(map.pair(map.finalised_node(0)), r, "the reduce-scatter finalises its own block");
                }
            }
        }
    }
}

#[test]
fn writes_raise_the_flags_readers_wait_for() {
    for (world, lw) in LAYOUTS.into_iter().filter(|&(w, l)| w > l) {
        for group in [1, 2, 3, 8, 100] {
            let shape = (1000, 300); // 8 x 2 tiles per block
            let p = params(0, world, lw, true, shape, group.min(16));
            let map = p.node_map();
            let items = p.items();
            let mut covered = 0;
            for g in 0..p.groups() {
                let (first, end) = p.group_items(g);
                assert!(first == covered && first < end && end <= items && end - first <= 2 * p.group);
                covered = end;
                // A reader on another node waits for the group's last item's flag, which the
                // WRITE (of the whole contiguous range) raises; for its own node, every item's.
                let other = (map.node() + 1) % map.nodes;
                for i in first..end {
                    assert_eq!(p.arrival_item(other, i), end - 1);
                    assert_eq!(p.arrival_item(map.node(), i), i);
                }
                let bytes = p.node_offset(0, 1, end - 1) + HALF_TILE_BYTES as u64 - p.node_offset(0, 1, first);
                assert_eq!(bytes, (end - first) as u64 * HALF_TILE_BYTES as u64, "a group is one range");
            }
            assert_eq!(covered, items);
        }
    }
}

#[test]
fn flags_and_staging_slots_never_overlap() {
    for (world, lw) in LAYOUTS {
        for (all_reduce, one_shot) in [(false, false), (true, false), (true, true)] {
            let nodes = world / lw;
            if one_shot && nodes > 1 {
                continue;
            }
            for shape in [(1000, 8), (128, 256), (300, 700)] {
                let mut p = params(world - 1, world, lw, all_reduce, shape, 2);
                p.one_shot = one_shot as u32;
                let per = GemmRsParams::per_owner(shape.0, shape.1);
                let inbox = GemmRsParams::inbox_tiles_of(world, per, one_shot);
                assert_eq!(inbox, p.inbox_tiles());
                let mut flags = BTreeSet::new();
                let mut flag = |i: u32| {
                    assert!(
                        i.is_multiple_of(FLAG_STRIDE) && i < GemmRsParams::flag_words(world, nodes, per, inbox),
                        "flag {i} out of range"
                    );
                    assert!(flags.insert(i), "flag {i} twice");
                };
                for s in 0..world {
                    flag(GemmRsParams::ready_flag(s));
                    for slot in 0..inbox {
                        for h in 0..2 {
                            flag(p.part_flag(s, slot, h));
                        }
                    }
                    for slot in 0..per {
                        for h in 0..2 {
                            flag(p.done_flag(s, slot, h));
                        }
                    }
                    // One node: the prefetches' and the pulled reduced tiles' flags.
                    for slot in (0..inbox).filter(|_| nodes == 1) {
                        for h in 0..2 {
                            flag(p.pref_flag(s, slot, h));
                            flag(p.ack_flag(s, slot, h));
                        }
                    }
                }
                // One shot: block q's tile `slot` has its own inbox slot for every q.
                let inbox_slots: BTreeSet<u32> =
                    (0..world).flat_map(|q| (0..per).map(move |t| (q, t))).map(|(q, t)| p.inbox_slot(q, t)).collect();
                assert_eq!(inbox_slots.len() as u32, if one_shot { inbox } else { per });
                assert!(inbox_slots.iter().all(|&x| x < inbox));
                let bytes = GemmRsParams::staging_bytes(world, inbox, p.pulls())
                    + if nodes > 1 { GemmRsParams::nodebox_bytes(nodes, per) } else { 0 };
                let mut slots = BTreeSet::new();
                let mut slot = |off: u64| {
                    assert!(off.is_multiple_of(HALF_TILE_BYTES as u64) && off + HALF_TILE_BYTES as u64 <= bytes);
                    assert!(slots.insert(off), "staging slot at {off} twice");
                };
                for s in 0..world {
                    for t in 0..inbox {
                        for h in 0..2 {
                            slot(p.slot_offset(s, t, h));
                            if p.pulls() {
                                slot(p.outbox_offset(s, t, h));
                            }
                        }
                    }
                }
                if nodes > 1 {
                    for qi in 0..nodes {
                        assert!(p.inbox(qi, lw - 1) < world);
                        for m in 0..nodes {
                            for i in 0..2 * per {
                                flag(p.node_flag(qi, m, i));
                                slot(p.node_offset(qi, m, i));
                            }
                        }
                    }
                }
                assert_eq!(slots.len() as u64 * HALF_TILE_BYTES as u64, bytes, "every byte of staging is a slot");
            }
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn node_walks_cover_every_tile_and_collect_after_the_sends(
        rows in 1u32..1200, n in 1u32..2000, lw in 1u32..=4, nodes in 1u32..=4, group_m in 1u32..10,
        lead in 0u32..80, stride in prop_oneof![Just(0u32), 1u32..200],
    ) {
        let world = lw * nodes;
        let walk = |r| NodeTiles::new(rows, n, (TILE_M, TILE_N), group_m, world, r, lw, lead).rotated(stride);
        let per = walk(0).blocks.per_owner();
        let grid = TileGrid::new(rows, n, TILE_M, TILE_N, group_m);
        // pos[rank][block * per + local]: where `rank` walks that tile.
        let mut pos = vec![vec![u32::MAX; (world * per) as usize]; world as usize];
        for r in 0..world {
            let s = walk(r);
            prop_assert_eq!(s.count(), world * per);
            for i in 0..s.count() {
                let (q, local) = s.walk(i);
                let t = s.tile(i);
                let o = s.blocks.locate(t.m, t.n);
                prop_assert_eq!(o.owner, q);
                prop_assert_eq!(grid.index_of(o.tm, o.tn), local);
                let k = (q * per + local) as usize;
                prop_assert_eq!(pos[r as usize][k], u32::MAX, "tile walked twice");
                pos[r as usize][k] = i;
            }
        }
        for r in 0..world {
            let map = walk(r).map;
            for q in (0..world).filter(|&q| map.collects(q)) {
                for s in (0..lw).map(|l| map.node() * lw + l).filter(|&s| s != r) {
                    for local in 0..per {
                        let k = (q * per + local) as usize;
                        prop_assert!(pos[s as usize][k] < pos[r as usize][k],
                            "rank {} collects tile {} of block {} at {}, rank {} sends it at {}",
                            r, local, q, pos[r as usize][k], s, pos[s as usize][k]);
                    }
                }
            }
        }
        if nodes == 1 {
            // One node: classes 3 and 4 alone, as OwnerTiles walks them with the same lead.
            for r in 0..world {
                let b = OwnerTiles::new(rows, n, (TILE_M, TILE_N), group_m, world, r, lead).rotated(stride);
                let a = walk(r);
                for i in 0..a.count() {
                    prop_assert_eq!(a.tile(i), b.tile(i));
                }
            }
        }
        // Every send first in each half: the four classes one after the other, each walked in
        // rounds (tile i of each of its blocks, then tile i + 1).
        for r in 0..world {
            let s = NodeTiles::new(rows, n, (TILE_M, TILE_N), group_m, world, r, lw, per).rotated(stride);
            let mut i = 0;
            for (c, size) in s.class_sizes().into_iter().enumerate() {
                let blocks: Vec<u32> = (0..size).map(|j| s.walk(i + j).0).collect();
                for t in 0..per {
                    for (j, &q) in blocks.iter().enumerate() {
                        prop_assert_eq!(s.walk(i), (q, t), "class {} round {} block {}", c, t, j);
                        i += 1;
                    }
                }
            }
            prop_assert_eq!(i, s.count());
        }
    }

    #[test]
    fn index_of_inverts_coords(m in 1u32..5000, n in 1u32..5000, group_m in 1u32..12) {
        let grid = TileGrid::new(m, n, TILE_M, TILE_N, group_m);
        for t in 0..grid.count() {
            let (tm, tn) = grid.coords(t);
            prop_assert_eq!(grid.index_of(tm, tn), t);
        }
    }
}
