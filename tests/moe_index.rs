//! Property tests (proptest, inside `cargo test`, no GPU) of the MoE kernel's index math, which
//! the device code and the host share (`mkernel::abi`): the pieces a row moves in.
use mkernel::abi::MoeParams;
use mkernel_device::kernels_info::allgather::BULK_CHUNK;
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

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
}
