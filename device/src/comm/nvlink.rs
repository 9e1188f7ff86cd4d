//! Copies into a peer GPU's memory over NVLink (or any global memory), usable from any role:
//! - [`BulkRing`]: one thread drives TMA bulk copies global -> shared -> global through a ring
//!   of shared-memory stages (the fastest way: ~40 GB/s per CTA, one issuing thread);
//! - [`lsu_copy`]: 16-byte vector loads and stores from `nthreads` threads (ragged tails, or
//!   where no shared memory is free); [`lsu_fan`]: aligned, to several places, each vector
//!   loaded once (a compute CTA's spare warps: AllGather + GEMM's `spread`; the all-gather's
//!   `lsu` copy). Per byte both ways cost the same on the wire: ncu counts the same NVLink
//!   protocol bytes for TMA bulk stores and for register stores (docs/PERF.md);
//! - [`copy_block`]: the whole CTA copies a range, bulk for the 16-byte multiple, LSU for the rest;
//!   [`copy_fan`]: the same to several places at once, each piece loaded once (bulk, or every
//!   thread's registers through [`lsu_fan`]);
//!   [`copy_fan_in`]: several (source, destination) pairs at once, their pieces interleaved, so
//!   one CTA keeps reads from every source in flight (an all-gather that pulls).
use crate::arch::*;
use crate::kernels_info::allgather::{BULK_AHEAD, BULK_CHUNK, BULK_STAGES};
use crate::pipeline::Pipeline;
use crate::sync::Bound;

const VEC: u64 = 16;

// A ring is the stages, then the pipeline's barriers: `BULK_SMEM_BYTES` in all.
const _: () = assert!(
    crate::kernels_info::allgather::BULK_SMEM_BYTES
        == BULK_CHUNK * BULK_STAGES + crate::pipeline::barrier_bytes(BULK_STAGES)
);

/// A ring of `BULK_STAGES` x `BULK_CHUNK` shared-memory stages at `base`, driven by one thread:
/// loads run `BULK_AHEAD` chunks in front of the stores, and a stage is reloaded only once the
/// store that read it is done reading. `used` counts chunks ever loaded, which gives each stage's
/// barrier phase across copies.
pub struct BulkRing {
    base: u32,
    pipe: Pipeline<BULK_STAGES>,
    used: u32,
    /// A wait timed out mid-copy: the barriers' phases are no longer known, so the ring refuses
    /// further copies (the launch is being abandoned anyway).
    broken: bool,
}

impl BulkRing {
    /// Set up the ring at shared address `base` (1024-byte aligned, `BULK_SMEM_BYTES` long).
    /// The calling thread is the one that copies; it initialises the barriers itself, so no
    /// block barrier is needed.
    ///
    /// # Safety
    /// The shared memory is this CTA's and no one else uses it while the ring lives.
    #[inline(always)]
    pub unsafe fn new(base: u32) -> Self {
        let pipe = Pipeline::at(base + BULK_CHUNK * BULK_STAGES);
        pipe.init(1);
        Self { base, pipe, used: 0, broken: false }
    }

    /// Give the ring's shared memory back (its barriers invalidated), e.g. to a GEMM that runs
    /// in the same CTA next. False when a copy was abandoned: a load may still land in a stage,
    /// so the memory must not be reused (the launch is being abandoned anyway).
    ///
    /// # Safety
    /// A block barrier follows before the memory is reused.
    #[inline(always)]
    pub unsafe fn retire(self) -> bool {
        if !self.broken {
            self.pipe.inval();
        }
        !self.broken
    }

    /// Every thread of a CTA that is done copying and runs something else in the same shared
    /// memory next: the thread that holds the ring retires it ([`BulkRing::retire`]) and says
    /// through the shared word `word` (outside the ring) whether the memory may be reused;
    /// every thread returns that.
    ///
    /// # Safety
    /// Every thread of the CTA calls it (block barriers); exactly one passes a ring.
    #[inline(always)]
    pub unsafe fn hand_over(ring: Option<BulkRing>, word: u32) -> bool {
        if let Some(r) = ring {
            st_shared_u32(word, r.retire() as u32);
        }
        sync_threads();
        let clean = ld_shared_u32(word) != 0;
        sync_threads(); // every thread has read the word before the memory is reused
        clean
    }

    /// Move `count` pieces through the ring: piece i is read from where `load(i)` says (an
    /// address and a length of at most `BULK_CHUNK` bytes, a multiple of 16) into a stage, then
    /// `store(i, stage)` issues the bulk stores that read it (to as many places as it likes;
    /// they form one bulk group). Loads run `BULK_AHEAD` pieces ahead of the stores. Waits until
    /// every write is done. `load` may wait for its data and give up (`None`); then, or when a
    /// wait of the ring times out (reported through `b`), the rest is skipped and it returns
    /// false.
    ///
    /// # Safety
    /// The addresses `load` and `store` use are valid global memory for the lengths involved.
    #[inline(always)]
    pub unsafe fn gather(
        &mut self,
        count: u32,
        mut load: impl FnMut(u32) -> Option<(u64, u32)>,
        mut store: impl FnMut(u32, u32),
        b: &Bound<'_>,
        tag: u32,
    ) -> bool {
        const STORES: u32 = BULK_STAGES - BULK_AHEAD;
        if self.broken {
            return false;
        }
        let used = self.used;
        let stage = |i: u32| (used + i) % BULK_STAGES;
        let (base, pipe) = (self.base, self.pipe);
        let mut issue = |i: u32| match load(i) {
            Some((src, len)) => {
                let s = stage(i);
                mbarrier_arrive_expect_tx(pipe.full(s), len);
                bulk_load(base + s * BULK_CHUNK, src, len, pipe.full(s));
                true
            }
            None => false,
        };
        let mut loaded = 0;
        while loaded < count.min(BULK_AHEAD) && issue(loaded) {
            loaded += 1;
        }
        let mut ok = loaded == count.min(BULK_AHEAD);
        let mut i = 0;
        while i < loaded {
            let s = stage(i);
            let parity = ((used + i) / BULK_STAGES) & 1;
            if b.mbarrier(pipe.full(s), parity, tag, crate::abi::WAIT_MBAR_FULL).is_err() {
                ok = false;
                break;
            }
            store(i, base + s * BULK_CHUNK);
            bulk_commit_group();
            if ok && loaded < count {
                // The stage of piece i + AHEAD was read by the stores of piece i + AHEAD - STAGES;
                // the STORES newer groups may still be reading.
                bulk_wait_group_read::<STORES>();
                if issue(loaded) {
                    loaded += 1;
                } else {
                    ok = false;
                }
            }
            i += 1;
        }
        bulk_wait_group::<0>();
        // Stages of pieces loaded but never stored still complete their phase later: the
        // barrier phases are no longer known.
        self.used += loaded;
        self.broken = !ok || i < loaded;
        ok && i == count
    }
}

/// The part of a byte range `start..` that bulk copies move, in `BULK_CHUNK` pieces: whole
/// 16-byte vectors (when bulk copies may be used at all); LSU copies take the rest from
/// `lsu_from`.
#[derive(Clone, Copy)]
struct BulkSpan {
    start: u64,
    lsu_from: u64,
}

impl BulkSpan {
    #[inline(always)]
    fn new((start, end): (u64, u64), bulk: bool) -> Self {
        Self { start, lsu_from: if bulk { start + (end - start) / VEC * VEC } else { start } }
    }
    /// Pieces of at most `BULK_CHUNK` bytes.
    #[inline(always)]
    fn pieces(&self) -> u32 {
        (self.lsu_from - self.start).div_ceil(BULK_CHUNK as u64) as u32
    }
    /// Where piece `i` starts.
    #[inline(always)]
    fn off(&self, i: u32) -> u64 {
        self.start + i as u64 * BULK_CHUNK as u64
    }
    /// Piece `i`'s length.
    #[inline(always)]
    fn len(&self, i: u32) -> u32 {
        (self.lsu_from - self.off(i)).min(BULK_CHUNK as u64) as u32
    }
}

/// Copy bytes `start..end` of `src` to `dst` with thread `tid` of `nthreads`: 16-byte vectors,
/// eight in flight per thread, when both addresses allow; bytes otherwise and for the tail.
///
/// # Safety
/// Both ranges are valid global memory; all `nthreads` threads call it with the same range.
#[inline(always)]
pub unsafe fn lsu_copy(src: *const u8, dst: *mut u8, start: u64, end: u64, tid: u32, nthreads: u32) {
    let t = tid as u64;
    let vec_ok = ((src as u64 + start) | (dst as u64 + start)).is_multiple_of(VEC);
    let aligned_end = if vec_ok { start + ((end - start) / VEC) * VEC } else { start };
    // Eight 16-byte loads in flight per thread before their stores: one at a time leaves an SM
    // latency-bound at ~10 GB/s (measured), far below NVLink.
    const UNROLL: u64 = 8;
    let step = nthreads as u64 * VEC;
    let mut base = start;
    while base + UNROLL * step <= aligned_end {
        let mut v = [[0u32; 4]; UNROLL as usize];
        for (k, x) in v.iter_mut().enumerate() {
            *x = ld_global_nc_v4_u32(src.add((base + k as u64 * step + t * VEC) as usize) as *const [u32; 4]);
        }
        for (k, x) in v.iter().enumerate() {
            st_global_v4_u32(dst.add((base + k as u64 * step + t * VEC) as usize) as *mut [u32; 4], *x);
        }
        base += UNROLL * step;
    }
    let mut i = base + t * VEC;
    while i < aligned_end {
        let v = ld_global_nc_v4_u32(src.add(i as usize) as *const [u32; 4]);
        st_global_v4_u32(dst.add(i as usize) as *mut [u32; 4], v);
        i += step;
    }
    let mut j = aligned_end + t;
    while j < end {
        *dst.add(j as usize) = *src.add(j as usize);
        j += nthreads as u64;
    }
}

/// Copy bytes `start..end` of `src` to `n` places at once (place `k` at `dst(k)`) with thread
/// `tid` of `nthreads`: `AHEAD` 16-byte vectors in flight per thread, each loaded once and stored
/// to every place. No shared memory: for spare warps beside other work (4 ahead, few registers)
/// or a whole comm CTA (8 ahead; the all-gather's `lsu` copy: on 64 CTAs it moved 5% more than
/// the bulk fan on 16, whose rate more CTAs did not raise; docs/PERF.md "The all-gather from
/// every thread's registers").
///
/// # Safety
/// `src + start`, every `dst(k) + start` and `end - start` are multiples of 16 and the ranges
/// valid global memory; all `nthreads` threads call it with the same arguments.
#[inline(always)]
pub unsafe fn lsu_fan<const AHEAD: usize>(
    src: u64,
    (n, dst): (u32, impl Fn(u32) -> u64),
    (start, end): (u64, u64),
    tid: u32,
    nthreads: u32,
) {
    let step = nthreads as u64 * VEC;
    let mut off = start + tid as u64 * VEC;
    while off < end {
        let mut v = [[0u32; 4]; AHEAD];
        for (j, x) in v.iter_mut().enumerate() {
            let at = off + j as u64 * step;
            if at < end {
                *x = ld_global_nc_v4_u32((src + at) as *const [u32; 4]);
            }
        }
        for k in 0..n {
            let to = dst(k);
            for (j, x) in v.iter().enumerate() {
                let at = off + j as u64 * step;
                if at < end {
                    st_global_v4_u32((to + at) as *mut [u32; 4], *x);
                }
            }
        }
        off += AHEAD as u64 * step;
    }
}

/// The whole CTA (`nthreads` threads, `tid` this one) copies `start..end` of `src` to `dst`. With
/// `bulk` (CTA-uniform) thread 0 moves the 16-byte multiple through `ring` when the addresses
/// allow, and every thread the rest; without, every thread copies with [`lsu_copy`]. Ends with a
/// block barrier, so on return thread 0 may announce the data. Returns false (on thread 0) when a
/// wait timed out (reported through `b`).
///
/// # Safety
/// As [`lsu_copy`]; with `bulk`, thread 0 passes its ring and the others `None`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_block(
    src: u64,
    dst: u64,
    range: (u64, u64),
    bulk: bool,
    ring: Option<&mut BulkRing>,
    b: &Bound<'_>,
    tag: u32,
    threads: (u32, u32),
) -> bool {
    copy_fan(src, (1, |_| dst), range, bulk, ring, b, tag, threads)
}

/// [`copy_block`] to `places.0` places at once, place `k` starting at `places.1(k)`: with bulk
/// copies each piece is loaded into shared memory once and stored to every place (one bulk group
/// per piece), so `src` is read once however many copies are made, and every place's stores are
/// in flight together.
///
/// # Safety
/// As [`copy_block`], for every place.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_fan(
    src: u64,
    (n, dst): (u32, impl Fn(u32) -> u64),
    (start, end): (u64, u64),
    bulk: bool,
    ring: Option<&mut BulkRing>,
    b: &Bound<'_>,
    tag: u32,
    (tid, nthreads): (u32, u32),
) -> bool {
    let aligned = (src + start).is_multiple_of(VEC) && (0..n).all(|k| (dst(k) + start).is_multiple_of(VEC));
    let span = BulkSpan::new((start, end), bulk && aligned);
    let mut ok = true;
    if let (true, Some(r)) = (bulk && aligned, ring) {
        let store = |i: u32, stage: u32| {
            for k in 0..n {
                bulk_store(dst(k) + span.off(i), stage, span.len(i));
            }
        };
        ok = r.gather(span.pieces(), |i| Some((src + span.off(i), span.len(i))), store, b, tag);
    }
    // Without bulk copies, every thread's vectors fan out (each loaded once); the ragged tail,
    // and unaligned places, byte by byte.
    let fan_end = if aligned && n > 0 { span.lsu_from + (end - span.lsu_from) / VEC * VEC } else { span.lsu_from };
    lsu_fan::<8>(src, (n, &dst), (span.lsu_from, fan_end), tid, nthreads);
    for k in 0..n {
        lsu_copy(src as *const u8, dst(k) as *mut u8, fan_end, end, tid, nthreads);
    }
    sync_threads();
    ok
}

/// [`copy_block`] of the same range for `pairs.0` (source, destination) pairs at once, pair `k`
/// being `pairs.1(k)`: with bulk copies the pairs' pieces go through the ring interleaved (piece
/// 0 of every pair, then piece 1, ...), so reads from every source are in flight together; when
/// the sources are peers' memory that is a pull over NVLink, spread over every link.
///
/// # Safety
/// As [`copy_block`], for every pair.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_fan_in(
    (n, pair): (u32, impl Fn(u32) -> (u64, u64)),
    (start, end): (u64, u64),
    bulk: bool,
    ring: Option<&mut BulkRing>,
    b: &Bound<'_>,
    tag: u32,
    (tid, nthreads): (u32, u32),
) -> bool {
    let aligned = (0..n).all(|k| {
        let (src, dst) = pair(k);
        (src + start).is_multiple_of(VEC) && (dst + start).is_multiple_of(VEC)
    });
    let span = BulkSpan::new((start, end), bulk && aligned);
    let mut ok = true;
    if let (true, Some(r), true) = (bulk && aligned, ring, n > 0) {
        // Ring piece i is pair i % n's piece i / n.
        let (pair_of, piece_of) = (|i: u32| pair(crate::sched::rem_nz(i, n)), |i: u32| crate::sched::div_nz(i, n));
        let load = |i: u32| Some((pair_of(i).0 + span.off(piece_of(i)), span.len(piece_of(i))));
        let store = |i: u32, stage: u32| bulk_store(pair_of(i).1 + span.off(piece_of(i)), stage, span.len(piece_of(i)));
        ok = r.gather(span.pieces() * n, load, store, b, tag);
    }
    for k in 0..n {
        let (src, dst) = pair(k);
        lsu_copy(src as *const u8, dst as *mut u8, span.lsu_from, end, tid, nthreads);
    }
    sync_threads();
    ok
}
