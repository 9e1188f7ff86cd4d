//! Where a compute CTA's tiles come from. A static scheduler's CTA walks `first, first + ctas,
//! ...` ([`TileIter`]): each thread knows the walk without asking anyone. A dynamic scheduler
//! ([`TileScheduler::DYNAMIC`]) hands the next schedule position to whichever CTA asks first,
//! from a counter in global memory: tiles then start in schedule order however long earlier ones
//! took, so CTAs that share operands through L2 (a grouped GEMM's tiles of one expert) stay
//! together instead of drifting apart over the launch. The producer thread takes a position and
//! publishes it through a two-slot ring in shared memory (a [`Pipeline`] of two stages and a word
//! per slot) to the consumer warpgroups; the other producer threads of a gathering producer read
//! it after their per-tile barrier.
//!
//! The counter pair is zero between launches: the last CTA to be done with it (to take the end
//! of the schedule, or to leave without a tile) puts both words back ([`Feed::retire`]).
use crate::abi::WAIT_MBAR_FULL;
use crate::arch::*;
use crate::kernels_info::gemm::TILE_RING_BYTES;
use crate::pipeline::{PipeState, Pipeline};
use crate::sched::{TileIter, TileScheduler};
use crate::sync::Bound;

/// The position that ends a walk.
const END: u32 = u32::MAX;

/// Readers of a published position: every consumer warp, once (after all its lanes read it).
const READERS: u32 = 8;

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
    st: PipeState<2>,
    next: *mut u32,
    done: *mut u32,
    count: u32,
    ctas: u32,
    dynamic: bool,
}

impl Feed {
    /// The walk of a compute CTA, one of `ctas`, over `sched`'s tiles; the ring at shared address
    /// `ring` (its [`TILE_RING_BYTES`]).
    #[inline(always)]
    pub fn of<S: TileScheduler>(sched: &S, ring: u32, first: u32, ctas: u32) -> Self {
        let (next, done) = sched.counters();
        let count = sched.count();
        Feed {
            walk: TileIter::new(first, ctas, count),
            ring: TileRing { base: ring },
            st: PipeState::start(),
            next,
            done,
            count,
            ctas,
            dynamic: S::DYNAMIC,
        }
    }

    /// Thread 0, before the CTA's first block barrier: initialise the ring (dynamic walks).
    ///
    /// # Safety
    /// The ring's shared memory is this CTA's and unused by anything else.
    #[inline(always)]
    pub unsafe fn init(&self) {
        if self.dynamic {
            self.ring.pipe().init(READERS);
        }
    }

    /// The producer thread: its next tile, taken from the counter and published to the
    /// consumers (dynamic), or the next of its static walk. `None` ends the walk (published too).
    ///
    /// # Safety
    /// Thread 0 of the CTA, after [`Feed::init`] and the block barrier; the counters are valid.
    #[inline(always)]
    pub unsafe fn produce(&mut self, b: &Bound<'_>) -> Option<u32> {
        if !self.dynamic {
            return self.walk.next();
        }
        let taken = atom_add_relaxed_gpu_u32(self.next, 1);
        let i = if taken < self.count { taken } else { END };
        let pipe = self.ring.pipe();
        if pipe.acquire(self.st, b, i).is_err() {
            trap();
        }
        st_shared_u32(self.ring.word(self.st.slot), i);
        // Release: the word is visible to whoever sees the phase complete.
        mbarrier_arrive(pipe.full(self.st.slot));
        self.st.advance();
        if i == END {
            self.retire();
            None
        } else {
            Some(i)
        }
    }

    /// A producer thread of a gathering producer, after the per-tile barrier that follows
    /// thread 0's [`Feed::produce`]: the position thread 0 took (static walks: its own).
    ///
    /// # Safety
    /// As for [`Feed::produce`]; called once per `produce` of thread 0, in step.
    #[inline(always)]
    pub unsafe fn follow(&mut self) -> Option<u32> {
        if !self.dynamic {
            return self.walk.next();
        }
        // Thread 0 rewrites this slot two positions later, after the next per-tile barrier.
        let i = ld_shared_u32(self.ring.word(self.st.slot));
        self.st.advance();
        (i != END).then_some(i)
    }

    /// A consumer thread: its warpgroup's next tile (dynamic: the one the producer published).
    ///
    /// # Safety
    /// A consumer thread, every lane of its warp together.
    #[inline(always)]
    pub unsafe fn consume(&mut self, b: &Bound<'_>) -> Option<u32> {
        if !self.dynamic {
            return self.walk.next();
        }
        let pipe = self.ring.pipe();
        if b.mbarrier(pipe.full(self.st.slot), self.st.phase, 0, WAIT_MBAR_FULL).is_err() {
            trap();
        }
        let i = ld_shared_u32(self.ring.word(self.st.slot));
        // Every lane has read the word before its warp gives the slot back.
        sync_warp();
        if lane_id() == 0 {
            pipe.release(self.st.slot);
        }
        self.st.advance();
        (i != END).then_some(i)
    }

    /// Thread 0 of a CTA that will take no (more) positions: count it done; the last CTA puts
    /// the counters back to zero for the next launch. [`Feed::produce`] calls it at the end of
    /// the walk; a CTA that leaves before its walk must call it itself.
    ///
    /// # Safety
    /// Once per CTA and launch, by thread 0; the counters are valid.
    #[inline(always)]
    pub unsafe fn retire(&self) {
        if self.dynamic && atom_add_acq_rel_gpu_u32(self.done, 1) == self.ctas - 1 {
            // Every CTA has taken its last position: nobody reads `next` again this launch.
            st_relaxed_gpu_u32(self.next, 0);
            st_relaxed_gpu_u32(self.done, 0);
        }
    }
}
