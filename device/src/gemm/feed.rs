//! Where a compute CTA's tiles come from. A static scheduler's CTA walks `first, first + ctas,
//! ...` ([`TileIter`]): each thread knows the walk without asking anyone. A dynamic scheduler
//! ([`TileScheduler::DYNAMIC`], e.g. [`crate::sched::Claimed`]) hands the next schedule position
//! to whichever CTA asks first, from a counter in global memory: tiles start in schedule order
//! however long earlier ones took, and CTAs that did other work first join where the walk is.
//! The producer thread draws a position and publishes it through a two-slot ring in shared
//! memory (a [`Pipeline`] of two stages and a word per slot) to the CTA's other walkers: the
//! consumer warps, and single threads such as an A writer or an epilogue's helpers.
//!
//! The counter pair is zero between launches: the last of the drawing CTAs to be done with it
//! (to draw past the end, or to leave without drawing) puts both words back ([`retire`]).
use crate::abi::WAIT_MBAR_FULL;
use crate::arch::*;
use crate::kernels_info::gemm::TILE_RING_BYTES;
use crate::pipeline::{PipeState, Pipeline};
use crate::sched::{TileIter, TileScheduler};
use crate::sync::{stop, Bound};

/// The position that ends a walk.
const END: u32 = u32::MAX;

/// No position drawn ahead yet.
const UNCLAIMED: u32 = u32::MAX - 1;

/// The two-slot ring in shared memory: the barriers of a two-stage [`Pipeline`], then a word per
/// slot.
#[derive(Clone, Copy)]
struct TileRing {
    base: u32,
}

impl TileRing {
    #[inline(always)]
    fn pipe(self) -> Pipeline<2> {
        Pipeline::at(self.base)
    }

    #[inline(always)]
    fn word(self, slot: u32) -> u32 {
        self.base + crate::pipeline::barrier_bytes(2) + 4 * slot
    }
}
const _: () = assert!(crate::pipeline::barrier_bytes(2) + 8 <= TILE_RING_BYTES);

/// One thread's view of its CTA's tile walk.
pub struct Feed {
    walk: TileIter,
    ring: TileRing,
    /// Positions walked: slot and phase of the ring in one register (the consumers have no
    /// register to spare next to their accumulators).
    seq: u32,
    /// The producer's position drawn ahead ([`Feed::claim`]), or [`UNCLAIMED`].
    claimed: u32,
    ctas: u32,
    dynamic: bool,
}

impl Feed {
    /// The walk of a CTA, one of `ctas` walking (static) or drawing (dynamic) `sched`'s tiles,
    /// with the ring at shared address `ring` ([`TILE_RING_BYTES`], 8-byte aligned); a static
    /// walk starts at `first` (joined late: see [`TileScheduler::static_join`]).
    #[inline(always)]
    pub fn of<S: TileScheduler>(sched: &S, ring: u32, first: u32, ctas: u32) -> Self {
        let count = sched.count();
        let (switch, early) = sched.static_join();
        Feed {
            walk: if early == 0 {
                TileIter::new(first, ctas, count)
            } else {
                TileIter::joined(first, early, ctas, count, switch)
            },
            ring: TileRing { base: ring },
            seq: 0,
            claimed: UNCLAIMED,
            ctas,
            dynamic: S::DYNAMIC,
        }
    }

    /// Where the ring is for the next position.
    #[inline(always)]
    fn state(&self) -> PipeState<2> {
        PipeState { slot: self.seq & 1, phase: (self.seq >> 1) & 1 }
    }

    /// One thread, before the CTA's first block barrier: initialise the ring of a dynamic walk
    /// for `readers` arrivals per position: each consumer warp and each single-thread walker.
    ///
    /// # Safety
    /// The ring's shared memory is this CTA's and unused by anything else.
    #[inline(always)]
    pub unsafe fn init<S: TileScheduler>(ring: u32, readers: u32) {
        if S::DYNAMIC {
            TileRing { base: ring }.pipe().init(readers);
        }
    }

    /// The producer thread: its next position, drawn from the counter and published to the
    /// other walkers (dynamic), or the next of its static walk. `None` ends the walk (published
    /// too).
    ///
    /// # Safety
    /// One thread of the CTA, after [`Feed::init`] and a block barrier; the counter is valid.
    #[inline(always)]
    pub unsafe fn produce<S: TileScheduler>(&mut self, sched: &S, b: &Bound<'_>) -> Option<u32> {
        if !self.dynamic {
            return self.walk.next();
        }
        self.claim(sched);
        let i = core::mem::replace(&mut self.claimed, UNCLAIMED);
        let (pipe, st) = (self.ring.pipe(), self.state());
        if pipe.acquire(st, b, i).is_err() {
            stop(b.diag);
        }
        st_shared_u32(self.ring.word(st.slot), i);
        // Release: the word is visible to whoever sees the phase complete.
        mbarrier_arrive(pipe.full(st.slot));
        self.seq += 1;
        if i == END {
            retire(sched.counters(), self.ctas);
            None
        } else {
            Some(i)
        }
    }

    /// The producer thread, before [`Feed::produce`]: draw the next position now (dynamic; once
    /// per position), to be published by the next `produce`.
    ///
    /// # Safety
    /// As for [`Feed::produce`].
    #[inline(always)]
    pub unsafe fn claim<S: TileScheduler>(&mut self, sched: &S) {
        if self.dynamic && self.claimed == UNCLAIMED {
            // The counters and the count are read from the scheduler at each draw, not held:
            // the producer thread runs on few registers.
            let counters = sched.counters();
            let taken = if counters.is_null() {
                self.walk.next().unwrap_or(END)
            } else {
                atom_add_relaxed_gpu_u32(counters, 1)
            };
            self.claimed = if taken < sched.count() { taken } else { END };
        }
    }

    /// Another walker of the CTA: its next position (dynamic: the one the producer published).
    /// `warp`: every lane of the calling warp reads it together (one arrival per warp);
    /// otherwise a single thread reads it (one arrival).
    ///
    /// # Safety
    /// One of the readers [`Feed::init`] counted, on every position of the walk.
    #[inline(always)]
    pub unsafe fn consume(&mut self, b: &Bound<'_>, warp: bool) -> Option<u32> {
        if !self.dynamic {
            return self.walk.next();
        }
        let (pipe, st) = (self.ring.pipe(), self.state());
        if b.mbarrier(pipe.full(st.slot), st.phase, 0, WAIT_MBAR_FULL).is_err() {
            stop(b.diag);
        }
        let i = ld_shared_u32(self.ring.word(st.slot));
        if warp {
            // Every lane has read the word before its warp gives the slot back.
            sync_warp();
        }
        if !warp || lane_id() == 0 {
            pipe.release(st.slot);
        }
        self.seq += 1;
        (i != END).then_some(i)
    }

    /// Thread 0 of a CTA counted among the `ctas` drawing ones that will run no tiles (its
    /// shared memory cannot take the engine after a failed copy): count it done drawing.
    ///
    /// # Safety
    /// Once per CTA and launch, instead of running the engine; the counters are valid or null.
    #[inline(always)]
    pub unsafe fn forfeit<S: TileScheduler>(sched: &S, ctas: u32) {
        if S::DYNAMIC {
            retire(sched.counters(), ctas);
        }
    }
}

/// One of `ctas` drawing CTAs is done with `counters`: the last one puts both words back to zero
/// for the next launch. Its acquire sees every other CTA's last draw, which came before that
/// CTA's own count: nobody draws again this launch. Null counters (a static walk through the
/// ring) have nothing to put back.
///
/// # Safety
/// Once per CTA and launch; `counters` is the valid pair, or null.
#[inline(always)]
unsafe fn retire(counters: *mut u32, ctas: u32) {
    if !counters.is_null() && atom_add_acq_rel_gpu_u32(counters.add(1), 1) == ctas - 1 {
        st_relaxed_gpu_u32(counters, 0);
        st_relaxed_gpu_u32(counters.add(1), 0);
    }
}
