//! Device buffers with borrowed views, and pinned / GPU-mapped host memory.
use super::error::{check, Result};
use bytemuck::Pod;
use cust_raw as sys;
use std::marker::PhantomData;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Mutex;

/// Frees that failed inside `Drop` (after a device trap the context is broken and every free
/// fails): counted and the last one kept, for [`take_drop_errors`]; never a panic in `Drop`.
static DROP_FAILURES: AtomicU64 = AtomicU64::new(0);
static LAST_DROP_FAILURE: Mutex<Option<String>> = Mutex::new(None);

pub(crate) fn record_drop_failure(what: &str, e: super::error::GpuError) {
    DROP_FAILURES.fetch_add(1, Ordering::Relaxed);
    *LAST_DROP_FAILURE.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!("{what}: {e}"));
}

/// Set once a stream was found stuck ([`super::Gpu::synchronize_bounded`]): a free would block
/// behind the stuck kernel (`cuMemFree` waits for the device), so from then on `Drop` leaks
/// instead, counted in `LEAKED`, and the process can still report and exit.
static STUCK: AtomicBool = AtomicBool::new(false);
static LEAKED: AtomicU64 = AtomicU64::new(0);

pub(super) fn mark_stuck() {
    STUCK.store(true, Ordering::Relaxed);
}

/// `Err(Stuck)` once a stream was found stuck: `call` (a synchronous copy or memset, which
/// waits for the context's earlier work) would wait behind the stuck kernel forever.
fn refuse_if_stuck(call: &'static str) -> Result<()> {
    if STUCK.load(Ordering::Relaxed) {
        return Err(super::error::GpuError::Stuck { call });
    }
    Ok(())
}

/// Whether `Drop` should leak (counting it) rather than free.
pub(crate) fn leak_instead() -> bool {
    let stuck = STUCK.load(Ordering::Relaxed);
    if stuck {
        LEAKED.fetch_add(1, Ordering::Relaxed);
    }
    stuck
}

/// Device and mapped allocations left unfreed because a kernel of this process is stuck (see
/// [`super::Gpu::synchronize_bounded`]); 0 while none is.
pub fn leaked_frees() -> u64 {
    LEAKED.load(Ordering::Relaxed)
}

/// The frees that failed in `Drop` since the last call, as one error (Ok when none did). Call it
/// after handling a device error to learn what could not be released.
pub fn take_drop_errors() -> Result<()> {
    let count = DROP_FAILURES.swap(0, Ordering::Relaxed);
    let last = LAST_DROP_FAILURE.lock().unwrap_or_else(|p| p.into_inner()).take();
    match (count, last) {
        (0, _) => Ok(()),
        (count, last) => Err(super::error::GpuError::DropFailed { count, last: last.unwrap_or_default() }),
    }
}

/// An owned device allocation of `len` elements of `T` (freed on drop).
pub struct DeviceBuffer<T: Pod> {
    ptr: sys::CUdeviceptr,
    len: usize,
    _t: PhantomData<T>,
}

// SAFETY: the buffer is plain device memory; the handle is an address.
unsafe impl<T: Pod + Send> Send for DeviceBuffer<T> {}
// SAFETY: as for Send: shared use only reads the address.
unsafe impl<T: Pod + Sync> Sync for DeviceBuffer<T> {}

/// A borrowed range of a device buffer.
#[derive(Clone, Copy)]
pub struct DeviceSlice<'a, T: Pod> {
    ptr: sys::CUdeviceptr,
    len: usize,
    _t: PhantomData<&'a T>,
}

/// Wait for the legacy default stream. A pageable host-to-device copy (and a memset) may return
/// before its data lands in device memory; another process (a peer rank) would then see the old
/// contents, or see them overwrite its own later writes (seen on an H200: a poison fill landing
/// after a barrier clobbered a peer's all-gather shard).
fn legacy_stream_sync() -> Result<()> {
    // SAFETY: the null stream is the context's legacy default stream.
    check("cuStreamSynchronize", unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) })
}

/// Wait until every blocking stream of the calling thread's current context has drained (the
/// legacy default stream orders after them; every `Gpu` stream is blocking): no kernel or copy
/// queued before this call is still running. Refused once a stream was found stuck.
pub(crate) fn drain_blocking_streams() -> Result<()> {
    refuse_if_stuck("cuStreamSynchronize")?;
    legacy_stream_sync()
}

fn bytes_of<T>(len: usize) -> usize {
    len * std::mem::size_of::<T>()
}

impl<T: Pod> DeviceBuffer<T> {
    /// Allocate `len` elements (contents undefined; see [`DeviceBuffer::fill_bytes`]).
    /// The current thread must have the GPU's context current (any `Gpu` method ensures it).
    pub fn uninit(len: usize) -> Result<Self> {
        let mut ptr = 0;
        if len > 0 {
            // SAFETY: plain allocation; the pointer is written on success.
            check("cuMemAlloc", unsafe { sys::cuMemAlloc_v2(&mut ptr, bytes_of::<T>(len)) })?;
        }
        Ok(Self { ptr, len, _t: PhantomData })
    }

    /// Allocate and copy `data` in.
    pub fn from_slice(data: &[T]) -> Result<Self> {
        let b = Self::uninit(data.len())?;
        b.copy_from(data)?;
        Ok(b)
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of element 0 (what kernel parameter blocks carry).
    pub fn addr(&self) -> u64 {
        self.ptr
    }

    /// Borrow the whole buffer.
    pub fn as_slice(&self) -> DeviceSlice<'_, T> {
        DeviceSlice { ptr: self.ptr, len: self.len, _t: PhantomData }
    }

    /// Borrow a range of elements (panics when out of range, like slice indexing).
    pub fn slice(&self, r: Range<usize>) -> DeviceSlice<'_, T> {
        assert!(r.start <= r.end && r.end <= self.len, "range {r:?} out of bounds for {} elements", self.len);
        DeviceSlice { ptr: self.ptr + bytes_of::<T>(r.start) as u64, len: r.end - r.start, _t: PhantomData }
    }

    /// Copy `src` (exactly `len` elements) from the host (synchronous).
    pub fn copy_from(&self, src: &[T]) -> Result<()> {
        self.as_slice().copy_from(src)
    }

    /// Copy the buffer to a new host vector (synchronous).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        self.as_slice().to_vec()
    }

    /// Set every byte to `byte` (poisoning outputs before a test run); complete on return.
    pub fn fill_bytes(&self, byte: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        refuse_if_stuck("cuMemsetD8")?;
        // SAFETY: the range is this allocation.
        check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(self.ptr, byte, bytes_of::<T>(self.len)) })?;
        legacy_stream_sync()
    }

    /// Free now, returning the driver's verdict (drop frees too, but can only record a failure for
    /// [`take_drop_errors`]).
    pub fn free(mut self) -> Result<()> {
        let ptr = std::mem::take(&mut self.ptr);
        if ptr != 0 {
            // SAFETY: ptr came from cuMemAlloc and is freed once.
            check("cuMemFree", unsafe { sys::cuMemFree_v2(ptr) })?;
        }
        Ok(())
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr != 0 && !leak_instead() {
            // SAFETY: ptr came from cuMemAlloc and is freed once.
            let r = check("cuMemFree", unsafe { sys::cuMemFree_v2(self.ptr) });
            if let Err(e) = r {
                record_drop_failure("freeing a device buffer", e);
            }
        }
    }
}

impl<'a, T: Pod> From<&'a DeviceBuffer<T>> for DeviceSlice<'a, T> {
    fn from(b: &'a DeviceBuffer<T>) -> Self {
        b.as_slice()
    }
}

impl<'a, T: Pod> DeviceSlice<'a, T> {
    /// A view of `len` elements at device address `ptr`, borrowed for `'a`.
    ///
    /// # Safety
    /// `ptr..ptr + len * size_of::<T>()` is device memory of the current context, valid and aligned
    /// for `T` for as long as the view (lifetime `'a`) lives.
    pub(crate) unsafe fn from_raw(ptr: u64, len: usize) -> Self {
        DeviceSlice { ptr, len, _t: PhantomData }
    }

    /// Borrow a range of elements (panics when out of range, like slice indexing).
    pub fn slice(&self, r: Range<usize>) -> DeviceSlice<'a, T> {
        assert!(r.start <= r.end && r.end <= self.len, "range {r:?} out of bounds for {} elements", self.len);
        DeviceSlice { ptr: self.ptr + bytes_of::<T>(r.start) as u64, len: r.end - r.start, _t: PhantomData }
    }

    /// Set every byte to `byte`; complete on return.
    pub fn fill_bytes(&self, byte: u8) -> Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        refuse_if_stuck("cuMemsetD8")?;
        // SAFETY: the range is this view's memory.
        check("cuMemsetD8", unsafe { sys::cuMemsetD8_v2(self.ptr, byte, bytes_of::<T>(self.len)) })?;
        legacy_stream_sync()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Device address of the first element.
    pub fn addr(&self) -> u64 {
        self.ptr
    }

    /// Copy `src` (exactly `len` elements) from the host; the data is in device memory on return.
    /// A length mismatch is an error, checked before any driver call.
    pub fn copy_from(&self, src: &[T]) -> Result<()> {
        if src.len() != self.len {
            return Err(super::error::GpuError::InvalidArgument {
                arg: "src",
                rule: format!("{} elements for a device slice of {}: the lengths must match", src.len(), self.len),
            });
        }
        if self.len == 0 {
            return Ok(());
        }
        refuse_if_stuck("cuMemcpyHtoD")?;
        // SAFETY: both ranges are valid for len elements.
        check("cuMemcpyHtoD", unsafe { sys::cuMemcpyHtoD_v2(self.ptr, src.as_ptr().cast(), bytes_of::<T>(self.len)) })?;
        legacy_stream_sync()
    }

    /// Copy to a new host vector (synchronous).
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); self.len];
        if self.len > 0 {
            refuse_if_stuck("cuMemcpyDtoH")?;
            // SAFETY: both ranges are valid for len elements.
            check("cuMemcpyDtoH", unsafe {
                sys::cuMemcpyDtoH_v2(v.as_mut_ptr().cast(), self.ptr, bytes_of::<T>(self.len))
            })?;
        }
        Ok(v)
    }
}

/// Page-locked host memory, mapped into the GPU's address space: the GPU reads and writes it
/// directly (flags, FIFOs, diagnostics that must survive a stopped kernel).
pub struct MappedBuffer<T: Pod> {
    host: *mut T,
    dev: u64,
    len: usize,
}

// SAFETY: pinned host memory; concurrent access goes through atomics.
unsafe impl<T: Pod + Send> Send for MappedBuffer<T> {}
// SAFETY: as for Send: shared access goes through atomics or volatile element reads/writes.
unsafe impl<T: Pod + Sync> Sync for MappedBuffer<T> {}

impl<T: Pod> MappedBuffer<T> {
    /// Allocate `len` zeroed elements of pinned, device-mapped host memory.
    pub fn zeroed(len: usize) -> Result<Self> {
        let len = len.max(1);
        let mut host = std::ptr::null_mut();
        let flags = sys::CU_MEMHOSTALLOC_PORTABLE | sys::CU_MEMHOSTALLOC_DEVICEMAP;
        // SAFETY: plain allocation; the pointer is written on success.
        check("cuMemHostAlloc", unsafe { sys::cuMemHostAlloc(&mut host, bytes_of::<T>(len), flags) })?;
        let mut dev = 0;
        // SAFETY: host is a mapped allocation made just above.
        let r = check("cuMemHostGetDevicePointer", unsafe { sys::cuMemHostGetDevicePointer_v2(&mut dev, host, 0) });
        if let Err(e) = r {
            // SAFETY: freeing what we allocated.
            unsafe { sys::cuMemFreeHost(host) };
            return Err(e);
        }
        // SAFETY: len elements were allocated; zero bytes are a valid T (Pod).
        unsafe { std::ptr::write_bytes(host as *mut T, 0, len) };
        Ok(Self { host: host.cast(), dev, len })
    }

    /// The address kernels use.
    pub fn device_addr(&self) -> u64 {
        self.dev
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Read element `i` with a volatile load (the GPU may write it at any time).
    pub fn read(&self, i: usize) -> T {
        assert!(i < self.len);
        // SAFETY: in bounds; volatile because another agent writes it.
        unsafe { std::ptr::read_volatile(self.host.add(i)) }
    }

    /// Write element `i` with a volatile store.
    pub fn write(&self, i: usize, v: T) {
        assert!(i < self.len);
        // SAFETY: in bounds; volatile because another agent reads it.
        unsafe { std::ptr::write_volatile(self.host.add(i), v) }
    }

    /// Host pointer (for the proxy and for views of other types).
    pub fn host_ptr(&self) -> *mut T {
        self.host
    }
}

impl MappedBuffer<u32> {
    /// Element `i` as an atomic (acquire/release flags shared with the GPU at system scope).
    pub fn atomic(&self, i: usize) -> &AtomicU32 {
        assert!(i < self.len);
        // SAFETY: in bounds, 4-byte aligned, lives as long as &self.
        unsafe { AtomicU32::from_ptr(self.host.add(i)) }
    }
}

impl MappedBuffer<u64> {
    /// Element `i` as an atomic.
    pub fn atomic(&self, i: usize) -> &AtomicU64 {
        assert!(i < self.len);
        // SAFETY: in bounds, 8-byte aligned, lives as long as &self.
        unsafe { AtomicU64::from_ptr(self.host.add(i)) }
    }
}

impl<T: Pod> Drop for MappedBuffer<T> {
    fn drop(&mut self) {
        if leak_instead() {
            return;
        }
        // SAFETY: host came from cuMemHostAlloc and is freed once.
        let r = check("cuMemFreeHost", unsafe { sys::cuMemFreeHost(self.host.cast()) });
        if let Err(e) = r {
            record_drop_failure("freeing mapped host memory", e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_free_in_drop_is_recorded_not_a_panic() {
        // A pointer no driver allocated: the free fails (no device, no context, or an invalid
        // value) as it would after a device trap.
        drop(DeviceBuffer::<u32> { ptr: 0xdead_0000, len: 1, _t: PhantomData });
        match take_drop_errors() {
            Err(super::super::error::GpuError::DropFailed { count, last }) => {
                assert_eq!(count, 1);
                assert!(last.contains("cuMemFree"), "{last}");
            }
            other => panic!("{other:?}"),
        }
        assert!(take_drop_errors().is_ok(), "the failures were not taken");
    }

    #[test]
    fn copy_from_with_the_wrong_length_is_an_error() {
        let empty = DeviceBuffer::<u32>::uninit(0).unwrap();
        match empty.copy_from(&[1, 2]) {
            Err(super::super::error::GpuError::InvalidArgument { arg: "src", rule }) => {
                assert!(rule.contains("2 elements for a device slice of 0"), "{rule}")
            }
            other => panic!("{other:?}"),
        }
    }
}
