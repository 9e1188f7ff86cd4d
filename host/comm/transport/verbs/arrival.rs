//! Receiver-side arrival accounting: the one place that turns immediates into "what has landed
//! from this peer" and decides when a flag may be raised.
//!
//! Two kinds of write carry an immediate (encoded by [`Imm`]):
//! - a *slot piece*: a write into the receiver's host ring (a staged payload with its header, or
//!   a header-only flag record). Its immediate is the piece's sequence number modulo 2^31.
//!   Pieces are processed strictly in sequence order, whatever order they land in (SRD
//!   reorders even within one QP), so slots are freed in order and the sender's "slot =
//!   sequence % slots" reuse rule stays true.
//! - a *data unit* (unordered transports writing GPU memory directly): its immediate is the
//!   unit's sequence number modulo 2^31, naming the chunk. The receiver keeps the prefix of
//!   units that have all landed: a count alone would not do, since units sent after a flag can
//!   land before units the flag covers.
//!
//! A flag record carries `covers`: how many data units its sender had sent to this rank before
//! it. It may be raised only once units `0..covers` have all landed ([`Arrivals::covered`]);
//! flags are raised in record order, so a flag never goes backwards.
use crate::comm::error::{CommError, CommResult};

/// Bit 31 of an immediate: set for a data unit, clear for a slot piece.
const DATA_BIT: u32 = 1 << 31;
/// Sequence numbers travel modulo 2^31 (the other bit is the kind).
const SEQ_MASK: u64 = (1 << 31) - 1;

/// What a write's immediate says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Imm {
    /// A piece in the peer's slot ring; sequence number modulo 2^31.
    Slot(u32),
    /// A data unit written straight to GPU memory; sequence number modulo 2^31.
    Data(u32),
}

impl Imm {
    /// The immediate for slot piece `seq`.
    pub fn slot(seq: u64) -> u32 {
        (seq & SEQ_MASK) as u32
    }
    /// The immediate for data unit `seq`.
    pub fn data(seq: u64) -> u32 {
        DATA_BIT | (seq & SEQ_MASK) as u32
    }
    /// Decode a received immediate.
    pub fn decode(imm: u32) -> Imm {
        if imm & DATA_BIT != 0 {
            Imm::Data(imm & !DATA_BIT)
        } else {
            Imm::Slot(imm)
        }
    }
}

fn arrival_err(what: String) -> CommError {
    CommError::Transport { transport: "verbs", what }
}

/// What has landed from one peer (see the module docs).
#[derive(Clone, Debug)]
pub struct Arrivals {
    slots: u32,
    /// The next slot piece to process (its full sequence number).
    next: u64,
    /// By slot index: the piece there has landed and is not processed yet.
    landed_slot: Vec<bool>,
    /// Data units `0..landed` have all landed.
    landed: u64,
    /// Units past the prefix: `ahead[i]`: unit `landed + i` has landed.
    ahead: std::collections::VecDeque<bool>,
}

/// The most data units that may land ahead of the first missing one (every one of them holds a
/// posted receive, so a real window is far smaller).
const MAX_AHEAD: u64 = 1 << 24;

impl Arrivals {
    /// Accounting for a ring of `slots` slots (at least 1).
    pub fn new(slots: u32) -> Self {
        let slots = slots.max(1);
        Self { slots, next: 0, landed_slot: vec![false; slots as usize], landed: 0, ahead: Default::default() }
    }

    /// A slot piece landed with immediate sequence `seq31`. Errors when it lies outside the
    /// window the sender may have in flight (`slots` pieces from the next unprocessed one) or
    /// landed twice.
    pub fn slot_landed(&mut self, from: u32, seq31: u32) -> CommResult<u32> {
        let ahead = (seq31 as u64).wrapping_sub(self.next) & SEQ_MASK;
        if ahead >= self.slots as u64 {
            return Err(arrival_err(format!(
                "piece {seq31} from rank {from}: outside the window of {} slots after piece {}",
                self.slots,
                self.next & SEQ_MASK
            )));
        }
        let slot = ((self.next + ahead) % self.slots as u64) as u32;
        if std::mem::replace(&mut self.landed_slot[slot as usize], true) {
            return Err(arrival_err(format!("piece {seq31} from rank {from}: slot {slot} landed twice")));
        }
        Ok(slot)
    }

    /// The slot of the next piece in sequence order, if it has landed.
    pub fn next_ready(&self) -> Option<u32> {
        let slot = (self.next % self.slots as u64) as u32;
        self.landed_slot[slot as usize].then_some(slot)
    }

    /// The piece [`Arrivals::next_ready`] named has been processed; its slot may be reused
    /// once the processing's memory operations finish (the caller's credit logic).
    pub fn consume(&mut self) {
        let slot = (self.next % self.slots as u64) as usize;
        debug_assert!(self.landed_slot[slot]);
        self.landed_slot[slot] = false;
        self.next += 1;
    }

    /// Data unit `seq31` (its sequence number modulo 2^31) landed. Errors when it is too far
    /// ahead of the first missing unit or landed twice.
    pub fn data_landed(&mut self, from: u32, seq31: u32) -> CommResult<()> {
        let i = (seq31 as u64).wrapping_sub(self.landed) & SEQ_MASK;
        if i >= MAX_AHEAD {
            return Err(arrival_err(format!(
                "data unit {seq31} from rank {from}: outside the window of {MAX_AHEAD} units from the first missing one, {} (landed before, or too far ahead)",
                self.landed & SEQ_MASK
            )));
        }
        let i = i as usize;
        if self.ahead.len() <= i {
            self.ahead.resize(i + 1, false);
        }
        if std::mem::replace(&mut self.ahead[i], true) {
            return Err(arrival_err(format!("data unit {seq31} from rank {from} landed twice")));
        }
        while self.ahead.front() == Some(&true) {
            self.ahead.pop_front();
            self.landed += 1;
        }
        Ok(())
    }

    /// Whether data units `0..covers` (all a flag record covers) have landed.
    pub fn covered(&self, covers: u64) -> bool {
        self.landed >= covers
    }

    /// Data units landed without a gap so far.
    pub fn data_units(&self) -> u64 {
        self.landed
    }

    /// Slot pieces processed so far.
    pub fn pieces(&self) -> u64 {
        self.next
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn immediates_round_trip_and_wrap() {
        for seq in [0u64, 1, 77, (1 << 31) - 1, 1 << 31, (1 << 33) + 5] {
            assert_eq!(Imm::decode(Imm::slot(seq)), Imm::Slot((seq & SEQ_MASK) as u32));
            assert_eq!(Imm::decode(Imm::data(seq)), Imm::Data((seq & SEQ_MASK) as u32));
        }
    }

    #[test]
    fn pieces_are_processed_in_sequence_whatever_order_they_land() {
        let mut a = Arrivals::new(4);
        assert_eq!(a.slot_landed(1, 2).unwrap(), 2);
        assert_eq!(a.next_ready(), None, "piece 0 has not landed");
        assert_eq!(a.slot_landed(1, 0).unwrap(), 0);
        assert_eq!(a.next_ready(), Some(0));
        a.consume();
        assert_eq!(a.next_ready(), None, "piece 1 has not landed");
        a.slot_landed(1, 1).unwrap();
        for want in [1, 2] {
            assert_eq!(a.next_ready(), Some(want));
            a.consume();
        }
        // Piece 6 is beyond the 4-slot window after piece 3; piece 3 is inside it.
        let e = a.slot_landed(5, 7).unwrap_err().to_string();
        assert!(e.contains("piece 7 from rank 5") && e.contains("window of 4 slots"), "{e}");
        assert_eq!(a.slot_landed(5, 3).unwrap(), 3);
        assert!(a.slot_landed(5, 3).unwrap_err().to_string().contains("landed twice"));
    }

    #[test]
    fn the_window_wraps_at_two_to_the_31() {
        let mut a = Arrivals::new(3);
        a.next = (1 << 31) - 1;
        let s = a.slot_landed(0, 0).unwrap(); // full sequence 2^31, one ahead
        assert_eq!(s as u64, (1u64 << 31) % 3);
        a.slot_landed(0, ((1u64 << 31) - 1) as u32).unwrap();
        a.consume();
        assert_eq!(a.next_ready(), Some(s));
    }

    #[test]
    fn flags_wait_for_the_units_they_cover_not_for_a_count() {
        let mut a = Arrivals::new(1);
        assert!(a.covered(0));
        // Units 1 and 2 (sent after a flag covering 0..2) land before unit 0: not covered.
        a.data_landed(1, 1).unwrap();
        a.data_landed(1, 2).unwrap();
        assert!(!a.covered(2), "two units landed, but not units 0 and 1");
        a.data_landed(1, 0).unwrap();
        assert!(a.covered(3) && a.data_units() == 3);
        a.data_landed(1, 5).unwrap();
        assert!(a.data_landed(1, 5).unwrap_err().to_string().contains("unit 5 from rank 1 landed twice"));
        let old = a.data_landed(1, 2).unwrap_err().to_string();
        assert!(old.contains("landed before"), "{old}");
        let far = a.data_landed(4, (3 + MAX_AHEAD) as u32).unwrap_err().to_string();
        assert!(far.contains("data unit") && far.contains("rank 4") && far.contains("outside the window"), "{far}");
    }
}
