//! The communicator's symmetric heap allocator: first fit over `[0, capacity)`, aligned, with
//! neighbouring free ranges merged. Pure bookkeeping: every rank makes the same calls in the same
//! order (allocation is collective), so every rank computes the same offsets and a buffer sits at
//! the same offset of every rank's heap.
//!
//! A freed allocation is retired, not free: a launch that used it may still be running, here or
//! on a peer that writes into this rank's copy. [`HeapAlloc::alloc`] takes free ranges only;
//! retired ones come back with [`HeapAlloc::reclaim`], which the communicator calls once no
//! launch can touch them (`Communicator::alloc`).
use std::collections::BTreeMap;

/// Free ranges by start offset.
#[derive(Debug)]
pub struct HeapAlloc {
    capacity: usize,
    free: BTreeMap<usize, usize>,
    live: BTreeMap<usize, usize>,
    retired: BTreeMap<usize, usize>,
}

impl HeapAlloc {
    /// An empty heap of `capacity` bytes.
    pub fn new(capacity: usize) -> Self {
        let mut free = BTreeMap::new();
        if capacity > 0 {
            free.insert(0, capacity);
        }
        Self { capacity, free, live: BTreeMap::new(), retired: BTreeMap::new() }
    }

    /// Reserve `bytes` (at least 1) at an offset that is a multiple of `align` (a power of two)
    /// from the free ranges; `None` when none fits (retired ranges are not free).
    pub fn alloc(&mut self, bytes: usize, align: usize) -> Option<usize> {
        debug_assert!(align.is_power_of_two());
        let bytes = bytes.max(1);
        let (&start, &len) = self.free.iter().find(|(&s, &l)| {
            let a = s.next_multiple_of(align);
            a.checked_add(bytes).is_some_and(|end| end <= s + l)
        })?;
        let at = start.next_multiple_of(align);
        self.free.remove(&start);
        if at > start {
            self.free.insert(start, at - start);
        }
        let end = at + bytes;
        if end < start + len {
            self.free.insert(end, start + len - end);
        }
        self.live.insert(at, bytes);
        Some(at)
    }

    /// Retire the allocation at `offset` (ignored when there is none): it is reused only after
    /// [`HeapAlloc::reclaim`].
    pub fn retire(&mut self, offset: usize) {
        if let Some(len) = self.live.remove(&offset) {
            self.retired.insert(offset, len);
        }
    }

    /// Make every retired range free again (the caller knows nothing still uses them); the bytes
    /// reclaimed.
    pub fn reclaim(&mut self) -> usize {
        let retired = std::mem::take(&mut self.retired);
        for (&offset, &len) in &retired {
            self.release(offset, len);
        }
        retired.values().sum()
    }

    /// Put `[offset, offset + len)` back among the free ranges, merged with its neighbours.
    fn release(&mut self, offset: usize, len: usize) {
        let (mut start, mut end) = (offset, offset + len);
        if let Some((&ps, &pl)) = self.free.range(..start).next_back() {
            if ps + pl == start {
                self.free.remove(&ps);
                start = ps;
            }
        }
        if let Some(&nl) = self.free.get(&end) {
            self.free.remove(&end);
            end += nl;
        }
        self.free.insert(start, end - start);
    }

    /// Total bytes.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes in live allocations.
    pub fn used(&self) -> usize {
        self.live.values().sum()
    }

    /// Bytes retired and not yet reclaimed.
    pub fn retired(&self) -> usize {
        self.retired.values().sum()
    }

    /// The largest allocation that would succeed now (alignment 1).
    pub fn largest_free(&self) -> usize {
        self.free.values().copied().max().unwrap_or(0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_fit_aligned_and_merging() {
        let mut h = HeapAlloc::new(1 << 20);
        let a = h.alloc(100, 256).unwrap();
        let b = h.alloc(1000, 256).unwrap();
        let c = h.alloc(10, 4096).unwrap();
        assert_eq!((a, b, c), (0, 256, 4096));
        assert_eq!(h.used(), 1110);
        h.retire(b);
        assert_eq!(h.alloc(500, 256), Some(1280), "a retired range is not free");
        assert_eq!(h.retired(), 1000);
        assert_eq!(h.reclaim(), 1000);
        assert_eq!(h.alloc(500, 256), Some(256), "first fit reuses the reclaimed hole");
        for o in [256, a, c, 1280] {
            h.retire(o);
        }
        assert_eq!(h.used(), 0);
        assert_eq!(h.largest_free(), (1 << 20) - 4106, "the free tail only, until reclaimed");
        h.reclaim();
        assert_eq!(h.largest_free(), 1 << 20, "everything merged back");
        assert_eq!(h.alloc(1 << 20, 256), Some(0));
        assert_eq!(h.alloc(1, 1), None);
    }

    #[test]
    fn same_calls_same_offsets() {
        // Two ranks making the same collective calls agree on every offset.
        let run = || {
            let mut h = HeapAlloc::new(1 << 16);
            let mut seen = Vec::new();
            let mut live = Vec::new();
            for i in 0..200usize {
                if i % 3 == 2 {
                    h.retire(live.remove(i % live.len()));
                } else if i % 17 == 0 {
                    h.reclaim();
                } else if let Some(o) = h.alloc(17 * (i % 11) + 1, 1 << (i % 9)) {
                    assert_eq!(o % (1 << (i % 9)), 0);
                    live.push(o);
                    seen.push(o);
                }
            }
            seen
        };
        assert_eq!(run(), run());
    }

    #[test]
    fn full_heap_and_overflowing_sizes_refuse() {
        let mut h = HeapAlloc::new(4096);
        assert_eq!(h.alloc(usize::MAX, 1), None);
        assert_eq!(h.alloc(usize::MAX - 10, 256), None);
        assert_eq!(h.alloc(4097, 1), None);
        assert!(h.alloc(4096, 1).is_some());
        h.retire(12345); // not an allocation: ignored
        assert_eq!(h.retired(), 0);
    }
}
