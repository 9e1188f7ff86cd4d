//! Property fuzzing (proptest, inside `cargo test`) of the two decoders that take bytes from
//! outside: the bootstrap frame decoder (whatever arrives on rank 0's port) and the FIFO command
//! decoder (whatever a GPU wrote into a slot). Neither may panic; both round-trip what the
//! encoders produce; and a FIFO command the decoder accepts never addresses past the offset space.
//! Failing cases are kept by proptest under `tests/fuzz.proptest-regressions` (the corpus).
use mkernel::abi::{FifoCmd, OP_FENCE, OP_SIGNAL, OP_WRITE};
use mkernel::comm::bootstrap::frame::{self, decode, encode, pack, unpack, Kind};
use mkernel::comm::command::{decode as decode_cmd, BadCommand, Command, OFFSET_SPACE};
use proptest::prelude::*;

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![Just(Kind::Hello), Just(Kind::Gather), Just(Kind::Result), Just(Kind::Error), Just(Kind::Abort)]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    #[test]
    fn frame_decoder_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..96)) {
        if let Ok(Some((f, used))) = decode(&bytes) {
            prop_assert!(used <= bytes.len() && used == frame::HEADER + f.payload.len());
        }
    }

    #[test]
    fn frame_decoder_takes_any_header_with_the_magic(
        k in any::<u32>(), seq in any::<u64>(), rank in any::<u32>(), len in any::<u32>(),
        tail in prop::collection::vec(any::<u8>(), 0..64),
    ) {
        let mut bytes = frame::MAGIC.to_le_bytes().to_vec();
        for w in [&k.to_le_bytes()[..], &seq.to_le_bytes(), &rank.to_le_bytes(), &len.to_le_bytes(), &tail] {
            bytes.extend_from_slice(w);
        }
        match decode(&bytes) {
            Ok(Some((f, _))) => prop_assert!(f.payload.len() == len as usize && f.seq == seq && f.rank == rank),
            Ok(None) => prop_assert!(len as usize > tail.len()),
            Err(_) => prop_assert!(!(1..=5).contains(&k) || len as usize > frame::MAX_PAYLOAD),
        }
    }

    #[test]
    fn frames_round_trip(k in kind(), seq in any::<u64>(), rank in any::<u32>(),
                         payload in prop::collection::vec(any::<u8>(), 0..256), cut in 0usize..300) {
        let bytes = encode(k, seq, rank, &payload).unwrap();
        let (f, used) = decode(&bytes).unwrap().unwrap();
        prop_assert_eq!(used, bytes.len());
        prop_assert_eq!((f.kind, f.seq, f.rank, &f.payload), (k, seq, rank, &payload));
        // Any prefix is "need more", never an error or a wrong frame.
        prop_assert!(decode(&bytes[..cut.min(bytes.len() - 1)]).unwrap().is_none());
    }

    #[test]
    fn unpack_takes_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..128), n in 0usize..100_000) {
        if let Some(blobs) = unpack(&bytes, n) {
            prop_assert_eq!(blobs.len(), n);
            prop_assert_eq!(pack(&blobs), bytes);
        }
    }

    #[test]
    fn pack_round_trips(blobs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40), 0..12)) {
        prop_assert_eq!(unpack(&pack(&blobs), blobs.len()), Some(blobs.clone()));
        prop_assert_eq!(unpack(&pack(&blobs), blobs.len() + 1), None);
    }

    #[test]
    fn command_decoder_takes_any_words(words in any::<[u64; 8]>()) {
        let c: FifoCmd = bytemuck::cast(words);
        match decode_cmd(&c) {
            Ok(Command::Write { src, dst, bytes, .. }) => {
                prop_assert_eq!(c.op(), OP_WRITE);
                prop_assert!(src.1.checked_add(bytes).is_some_and(|e| e <= OFFSET_SPACE));
                prop_assert!(dst.1.checked_add(bytes).is_some_and(|e| e <= OFFSET_SPACE));
            }
            Ok(Command::Signal { dst_rank }) => prop_assert!(c.op() == OP_SIGNAL && dst_rank == c.dst_rank()),
            Ok(Command::Fence) => prop_assert_eq!(c.op(), OP_FENCE),
            Err(BadCommand::UnknownOp(op)) => prop_assert!(op == c.op() && !(1..=3).contains(&op)),
            Err(BadCommand::Overflow { .. }) => prop_assert_eq!(c.op(), OP_WRITE),
            Err(e) => prop_assert!(false, "unexpected {e}"),
        }
    }

    #[test]
    fn well_formed_writes_decode(off in 0u64..OFFSET_SPACE, len in 0u64..OFFSET_SPACE, rank in 0u32..65536) {
        let bytes = len.min(OFFSET_SPACE - off);
        let c = FifoCmd {
            header: FifoCmd::header_word(OP_WRITE, 0, rank, 0),
            src: FifoCmd::loc(0, off),
            dst: FifoCmd::loc(1, off),
            bytes,
            ..Default::default()
        };
        prop_assert_eq!(decode_cmd(&c), Ok(Command::Write { dst_rank: rank, src: (0, off), dst: (1, off), bytes }));
        let over = FifoCmd { bytes: bytes + (OFFSET_SPACE - off - bytes) + 1, ..c };
        prop_assert!(decode_cmd(&over).is_err());
    }
}
