//! The TMA + mbarrier producer/consumer ring every kernel streams through: `STAGES` shared-memory
//! slots, each guarded by a *full* barrier (the producer's loads landed: one arrival carrying the
//! expected transaction bytes) and an *empty* barrier (every consumer is done with the slot).
//! Both sides walk the ring with a [`PipeState`]; a slot's phase parity flips each lap.
//!
//! Producer: `acquire` (wait until the slot is empty) -> `expect` (announce the bytes) -> issue
//! TMA loads completing on `full(slot)` -> `advance`. Consumer: `wait` (until full) -> read ->
//! `release` -> `advance`. Every wait is bounded ([`Bound`]).
use crate::abi::{WAIT_MBAR_EMPTY, WAIT_MBAR_FULL};
use crate::arch::*;
use crate::sync::{Bound, WaitResult};

/// Bytes of shared memory the barriers of a `STAGES`-deep pipeline take.
pub const fn barrier_bytes(stages: u32) -> u32 {
    2 * 8 * stages
}

/// A ring of `STAGES` slots whose barriers live at shared address `bars` (8-byte aligned,
/// [`barrier_bytes`] long): full barriers first, then empty ones.
#[derive(Clone, Copy)]
pub struct Pipeline<const STAGES: u32> {
    bars: u32,
}

/// Where one side of the pipeline is: slot and the parity of the slot's current use.
#[derive(Clone, Copy)]
pub struct PipeState<const STAGES: u32> {
    /// The slot, in `0..STAGES`.
    pub slot: u32,
    /// Parity (0 or 1) of the lap: the barrier phase this side waits for in `slot`.
    pub phase: u32,
}

impl<const STAGES: u32> PipeState<STAGES> {
    /// The first slot of the first lap.
    #[inline(always)]
    pub const fn start() -> Self {
        Self { slot: 0, phase: 0 }
    }

    /// Move to the next slot (flipping the phase after the last).
    #[inline(always)]
    pub fn advance(&mut self) {
        self.slot += 1;
        if self.slot == STAGES {
            self.slot = 0;
            self.phase ^= 1;
        }
    }
}

impl<const STAGES: u32> Pipeline<STAGES> {
    /// The pipeline whose barriers sit at shared address `bars`.
    #[inline(always)]
    pub const fn at(bars: u32) -> Self {
        Self { bars }
    }

    /// The full barrier of `slot` (TMA loads complete on it).
    #[inline(always)]
    pub const fn full(&self, slot: u32) -> u32 {
        self.bars + 8 * slot
    }

    /// The empty barrier of `slot`.
    #[inline(always)]
    pub const fn empty(&self, slot: u32) -> u32 {
        self.bars + 8 * (STAGES + slot)
    }

    /// Initialise every barrier: one producer arrival per fill, `consumers` arrivals per release.
    /// One thread calls it; make it visible with a block barrier before anyone waits.
    ///
    /// # Safety
    /// The barrier memory is this CTA's shared memory and not in use.
    #[inline(always)]
    pub unsafe fn init(&self, consumers: u32) {
        self.init_counts(1, consumers);
    }

    /// Initialise every barrier: `producers` arrivals per fill (one of them carrying the
    /// transaction bytes; the others `cp.async` arrivals), `consumers` per release. As
    /// [`Pipeline::init`] otherwise.
    ///
    /// # Safety
    /// As for [`Pipeline::init`].
    #[inline(always)]
    pub unsafe fn init_counts(&self, producers: u32, consumers: u32) {
        for s in 0..STAGES {
            mbarrier_init(self.full(s), producers);
            mbarrier_init(self.empty(s), consumers);
        }
        fence_mbarrier_init();
    }

    /// Invalidate every barrier, so its memory can hold other data.
    ///
    /// # Safety
    /// One thread calls it; no barrier has a waiter, a pending arrival or transaction bytes
    /// still to come; a block barrier follows before the memory is reused.
    #[inline(always)]
    pub unsafe fn inval(&self) {
        for s in 0..STAGES {
            mbarrier_inval(self.full(s));
            mbarrier_inval(self.empty(s));
        }
    }

    /// Producer: wait until the slot at `st` is free. A fresh barrier counts as having completed
    /// the phase before phase 0, so the first lap does not wait.
    ///
    /// # Safety
    /// The pipeline was initialised.
    #[inline(always)]
    pub unsafe fn acquire(&self, st: PipeState<STAGES>, b: &Bound<'_>, tile: u32) -> WaitResult {
        b.mbarrier(self.empty(st.slot), st.phase ^ 1, tile, WAIT_MBAR_EMPTY)
    }

    /// Producer: arrive on the slot's full barrier announcing `bytes` of loads to come.
    ///
    /// # Safety
    /// The slot was acquired; exactly `bytes` of async copies will complete on `full(slot)`.
    #[inline(always)]
    pub unsafe fn expect(&self, st: PipeState<STAGES>, bytes: u32) {
        mbarrier_arrive_expect_tx(self.full(st.slot), bytes);
    }

    /// Consumer: wait until the slot at `st` holds its data.
    ///
    /// # Safety
    /// The pipeline was initialised.
    #[inline(always)]
    pub unsafe fn wait(&self, st: PipeState<STAGES>, b: &Bound<'_>, tile: u32) -> WaitResult {
        b.mbarrier(self.full(st.slot), st.phase, tile, WAIT_MBAR_FULL)
    }

    /// Consumer: this consumer is done with `slot` (one of the `consumers` arrivals).
    ///
    /// # Safety
    /// The pipeline was initialised; each consumer releases each fill once.
    #[inline(always)]
    pub unsafe fn release(&self, slot: u32) {
        mbarrier_arrive(self.empty(slot));
    }
}
