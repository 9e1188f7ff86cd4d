//! Property tests (proptest, inside `cargo test`) of the verbs engine's command handling: any
//! FIFO command sequence, any slot header and immediate a peer could send, any landing order.
//! The properties: no panic (debug and release), every outcome Ok or a typed error, and the
//! simulated fabric's own checks: no write aimed outside the peer's regions, no read outside
//! local memory, no flag raised before its data, no flag going backwards.
use super::arrival::{Arrivals, Imm};
use super::engine::*;
use super::engine_tests::{base, direct, World, BUF_FLAGS};
use crate::abi::{FifoCmd, OFFSET_BITS};
use crate::comm::error::{CommError, CommResult};
use proptest::prelude::*;
use std::time::Duration;

const RANKS: u32 = 3;
const N: u64 = 4096;

fn configs() -> Vec<EngineConfig> {
    let t = Duration::from_millis(5);
    let srd = EngineConfig {
        delivery: Delivery::Unordered,
        rails: vec!["a".into(), "b".into()],
        records: StagedConfig { slots: 4, slot_bytes: 128 },
        timeout: t,
        ..direct(2)
    };
    let staged = EngineConfig { staged: Some(StagedConfig { slots: 2, slot_bytes: 256 }), timeout: t, ..direct(1) };
    vec![
        EngineConfig { timeout: t, ..direct(2) },
        srd.clone(),
        staged.clone(),
        EngineConfig { staged: staged.staged, ..srd },
    ]
}

/// Offsets and lengths around every boundary: zero, small, a region's end, the FIFO
/// location's largest offset, u64 extremes.
fn edge() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        1u64..64,
        (N - 64)..(N + 64),
        (RANKS as u64 * N - 8)..(RANKS as u64 * N + 8),
        Just((1u64 << OFFSET_BITS) - 1),
        (u64::MAX - 8)..=u64::MAX,
        any::<u64>(),
    ]
}

prop_compose! {
    fn command()(op in 0u64..5, dst in 0u32..RANKS + 2, src_id in 0u64..5, src in edge(), dst_id in 0u64..5,
                 dst_off in edge(), bytes in edge(), flag_id in prop_oneof![Just(BUF_FLAGS), 0u64..5],
                 flag_off in edge(), flagged in any::<bool>(), value in any::<u64>()) -> FifoCmd {
        FifoCmd {
            header: FifoCmd::header_word(op, 0, dst, 0),
            src: FifoCmd::loc(src_id, src),
            dst: FifoCmd::loc(dst_id, dst_off),
            bytes,
            flag: if flagged { FifoCmd::loc(flag_id, flag_off) } else { 0 },
            flag_value: value,
            ..Default::default()
        }
    }
}

/// A typed outcome: Ok, or one of the transport's error variants.
fn typed(r: &CommResult<()>) -> bool {
    matches!(r, Ok(()) | Err(CommError::OutOfBounds { .. } | CommError::Transport { .. }))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, failure_persistence: None, ..ProptestConfig::default() })]

    #[test]
    fn any_command_sequence_is_handled_or_refused(cmds in prop::collection::vec(command(), 1..12), which in 0usize..4) {
        let cfg = configs().swap_remove(which);
        let w = World::new(RANKS, N, &cfg, 11);
        let mut engines: Vec<Engine> = (0..RANKS).map(|r| w.engine(&cfg, r).unwrap()).collect();
        let mut io: Vec<_> = (0..RANKS).map(|r| w.nic(r)).collect();
        for (e, (n, m)) in engines.iter_mut().zip(io.iter_mut()) {
            e.start(n, m).unwrap();
        }
        for c in &cmds {
            let (n, m) = &mut io[0];
            let r = engines[0].post(std::slice::from_ref(c), n, m);
            prop_assert!(typed(&r), "{c:?}: {r:?}");
            for q in 1..RANKS as usize {
                let (n, m) = &mut io[q];
                let r = engines[q].progress(n, m);
                prop_assert!(typed(&r), "peer {q}: {r:?}");
            }
        }
        let (n, m) = &mut io[0];
        let r = engines[0].flush(n, m);
        prop_assert!(typed(&r), "flush: {r:?}");
    }

    #[test]
    fn any_slot_header_and_immediate_from_a_peer_is_handled_or_refused(
        ring in prop::collection::vec(any::<u8>(), 0..2048), imms in prop::collection::vec((any::<u32>(), 0usize..12), 1..16),
        which in 0usize..4,
    ) {
        let cfg = configs().swap_remove(which);
        let w = World::new(RANKS, N, &cfg, 12);
        let mut e = w.engine(&cfg, 0).unwrap();
        let (mut nic, mut mem) = w.nic(0);
        e.start(&mut nic, &mut mem).unwrap();
        // Whatever a peer could have written into our staging area (rank 1's rings).
        if let Some(s) = cfg.ring() {
            let start = base(0, 3) + s.per_peer();
            let len = (ring.len() as u64).min(s.per_peer()) as usize;
            mem.write_host(start, &ring[..len]);
        }
        let mut fake = Scripted(imms.iter().map(|&(imm, qp)| Completion { qp, kind: CompletionKind::RecvImm { imm }, error: None }).collect());
        for _ in 0..imms.len() {
            let r = e.progress(&mut fake, &mut mem);
            prop_assert!(typed(&r), "{r:?}");
            if r.is_err() {
                break;
            }
        }
    }

    #[test]
    fn pieces_are_processed_in_sequence_in_any_landing_order(slots in 1u32..9, order in Just((0..64u64).collect::<Vec<u64>>()).prop_shuffle()) {
        // The sender has at most `slots` pieces in flight: land any order within that window.
        let mut a = Arrivals::new(slots);
        let mut pending: Vec<u64> = Vec::new();
        let mut next_send = 0u64;
        let mut processed = Vec::new();
        let mut k = 0;
        while processed.len() < 64 {
            while next_send < 64 && next_send < a.pieces() + slots as u64 { pending.push(next_send); next_send += 1; }
            // Land the pending piece the permutation ranks first.
            let i = (0..pending.len()).min_by_key(|&i| order[pending[i] as usize] ^ k).unwrap();
            k += 1;
            let seq = pending.swap_remove(i);
            let Imm::Slot(s31) = Imm::decode(Imm::slot(seq)) else { unreachable!() };
            a.slot_landed(1, s31).unwrap();
            while let Some(slot) = a.next_ready() {
                prop_assert_eq!(slot as u64, a.pieces() % slots as u64);
                processed.push(a.pieces());
                a.consume();
            }
        }
        prop_assert_eq!(processed, (0..64).collect::<Vec<u64>>());
    }
}

/// A NIC whose completions are scripted; sends and receives are accepted.
struct Scripted(Vec<Completion>);

impl Nic for Scripted {
    fn post_send(&mut self, _qp: usize, _wr: &WorkRequest) -> CommResult<()> {
        Ok(())
    }
    fn post_recv(&mut self, _qp: usize, _n: u32) -> CommResult<()> {
        Ok(())
    }
    fn poll(&mut self, out: &mut Vec<Completion>) -> CommResult<()> {
        if !self.0.is_empty() {
            out.push(self.0.remove(0));
        }
        Ok(())
    }
}
