//! Owned verbs objects. Each is an [`Obj`]: the raw pointer, the verb that destroys it, and
//! its parents (`Arc`s), so a child always dies before its parents and a bring-up that fails
//! half way drops what it made, children first, leaking nothing. Drop never panics: a destroy
//! verb that fails is reported on stderr and counted ([`teardown_failures`]).
//!
//! Ownership: context <- PD, CQ; PD <- MR, AH; (PD, CQ) <- QP. The QP also holds its CQ, which
//! verbs refuse to destroy while a QP uses it.
use crate::comm::error::{CommError, CommResult};
use rdma_sys::*;
use std::ffi::c_int;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

static TEARDOWN_FAILURES: AtomicU64 = AtomicU64::new(0);

/// How many verbs destroy calls failed in this process (each was also printed on stderr).
pub fn teardown_failures() -> u64 {
    TEARDOWN_FAILURES.load(Ordering::Relaxed)
}

/// The verb that destroys a `T` (returns 0 or an errno).
pub type Destroy<T> = unsafe fn(*mut T) -> c_int;

/// A verbs object of type `T` with parents `P` (see the module docs).
pub struct Obj<T, P> {
    ptr: *mut T,
    destroy: Destroy<T>,
    what: &'static str,
    /// Dropped after `ptr` is destroyed (fields drop after `Drop::drop`).
    parent: P,
}

// SAFETY: verbs objects may be used and destroyed from any thread (libibverbs is thread-safe);
// the transport uses them from one thread at a time.
unsafe impl<T, P: Send> Send for Obj<T, P> {}
// SAFETY: as above; shared references only read the pointer.
unsafe impl<T, P: Sync> Sync for Obj<T, P> {}

impl<T, P> Obj<T, P> {
    /// Take ownership of `ptr` (made by the verb named `what`), or report why it is null.
    ///
    /// # Safety
    /// A non-null `ptr` must be a live object that `destroy` frees exactly once, whose
    /// parents are kept alive by `parent`, and that nothing else destroys.
    pub unsafe fn new(ptr: *mut T, what: &'static str, destroy: Destroy<T>, parent: P) -> CommResult<Self> {
        if ptr.is_null() {
            let e = std::io::Error::last_os_error();
            return Err(CommError::Transport { transport: "verbs", what: format!("{what} failed: {e}") });
        }
        Ok(Self { ptr, destroy, what, parent })
    }

    /// The raw pointer, for verbs calls; valid while `self` lives.
    pub fn as_ptr(&self) -> *mut T {
        self.ptr
    }

    /// The parents.
    pub fn parent(&self) -> &P {
        &self.parent
    }
}

impl<T, P> Drop for Obj<T, P> {
    fn drop(&mut self) {
        // SAFETY: `new` took sole ownership of a live object; this is its only destroy call, and
        // every child holding an Arc of this object is already gone.
        let rc = unsafe { (self.destroy)(self.ptr) };
        if rc != 0 {
            TEARDOWN_FAILURES.fetch_add(1, Ordering::Relaxed);
            let e = std::io::Error::from_raw_os_error(rc.abs());
            eprintln!("mkernel: verbs teardown: destroying the {} failed: {e} (object leaked)", self.what);
        }
    }
}

/// An open device.
pub type Context = Obj<ibv_context, ()>;
/// A protection domain.
pub type Pd = Obj<ibv_pd, Arc<Context>>;
/// A completion queue.
pub type Cq = Obj<ibv_cq, Arc<Context>>;
/// A memory registration.
pub type Mr = Obj<ibv_mr, Arc<Pd>>;
/// A queue pair.
pub type Qp = Obj<ibv_qp, (Arc<Pd>, Arc<Cq>)>;
/// An address handle (SRD peers).
pub type Ah = Obj<ibv_ah, Arc<Pd>>;

impl Mr {
    /// (lkey, rkey) of the registration.
    pub fn keys(&self) -> (u32, u32) {
        // SAFETY: a live registration (owned by self).
        unsafe { ((*self.ptr).lkey, (*self.ptr).rkey) }
    }
}

impl Qp {
    /// The QP number.
    pub fn qpn(&self) -> u32 {
        // SAFETY: a live QP (owned by self).
        unsafe { (*self.ptr).qp_num }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    // Fake objects: a name; destroying one logs it (or fails, for names starting with '!').
    // One log per test thread, so parallel tests do not mix.
    thread_local! {
        static LOG: Mutex<Vec<String>> = const { Mutex::new(Vec::new()) };
    }
    struct Fake(&'static str);
    unsafe fn destroy_fake(p: *mut Fake) -> c_int {
        // SAFETY: p came from Box::into_raw in `fake` and is destroyed once.
        let f = unsafe { Box::from_raw(p) };
        LOG.with(|l| l.lock().unwrap().push(f.0.to_string()));
        if f.0.starts_with('!') {
            libc::EBUSY
        } else {
            0
        }
    }
    fn fake<P>(name: &'static str, parent: P) -> CommResult<Obj<Fake, P>> {
        // SAFETY: a fresh box, destroyed once by destroy_fake.
        unsafe { Obj::new(Box::into_raw(Box::new(Fake(name))), name, destroy_fake, parent) }
    }
    fn log() -> Vec<String> {
        LOG.with(|l| std::mem::take(&mut *l.lock().unwrap()))
    }

    /// What connect() does, in miniature: context, PD, CQ, two MRs, a QP, an AH, then a
    /// failure before the end. Everything made is destroyed once, children before parents.
    fn bring_up(fail_after_qp: bool) -> CommResult<()> {
        let ctx = Arc::new(fake("ctx", ())?);
        let pd = Arc::new(fake("pd", ctx.clone())?);
        let cq = Arc::new(fake("cq", ctx.clone())?);
        let _mrs = [fake("mr0", pd.clone())?, fake("mr1", pd.clone())?];
        let _qp = fake("qp", (pd.clone(), cq.clone()))?;
        let _ah = fake("ah", pd.clone())?;
        if fail_after_qp {
            return Err(CommError::Transport { transport: "verbs", what: "ibv_modify_qp(RTR) failed".into() });
        }
        Ok(())
    }

    #[test]
    fn a_bring_up_failing_half_way_destroys_everything_children_first() {
        log();
        assert!(bring_up(true).is_err());
        let order = log();
        let mut sorted = order.clone();
        sorted.sort();
        assert_eq!(sorted, ["ah", "cq", "ctx", "mr0", "mr1", "pd", "qp"], "each object destroyed once: {order:?}");
        let at = |n: &str| order.iter().position(|x| x == n).unwrap();
        for (child, parent) in [("qp", "pd"), ("qp", "cq"), ("mr0", "pd"), ("mr1", "pd"), ("ah", "pd")] {
            assert!(at(child) < at(parent), "{child} destroyed after its parent {parent}: {order:?}");
        }
        for parent in ["pd", "cq"] {
            assert!(at(parent) < at("ctx"), "{parent} after the context: {order:?}");
        }
    }

    #[test]
    fn a_parent_lives_while_any_child_does() {
        log();
        let ctx = Arc::new(fake("ctx", ()).unwrap());
        let pd = Arc::new(fake("pd", ctx.clone()).unwrap());
        let mr = fake("mr", pd.clone()).unwrap();
        drop((ctx, pd));
        assert!(log().is_empty(), "context and PD must outlive the MR");
        drop(mr);
        assert_eq!(log(), ["mr", "pd", "ctx"]);
    }

    #[test]
    fn a_failing_destroy_is_counted_and_never_panics() {
        log();
        let before = teardown_failures();
        let ctx = Arc::new(fake("ctx", ()).unwrap());
        drop(fake("!qp", ctx.clone()).unwrap());
        drop(ctx);
        assert_eq!(log(), ["!qp", "ctx"], "the parent is still destroyed after a failed child");
        assert!(teardown_failures() > before, "the failure was counted");
    }

    #[test]
    fn a_null_object_is_an_error_naming_the_verb() {
        // SAFETY: null is never destroyed.
        let e = unsafe { Obj::<Fake, ()>::new(std::ptr::null_mut(), "ibv_alloc_pd", destroy_fake, ()) };
        let msg = e.err().expect("null must be an error").to_string();
        assert!(msg.contains("ibv_alloc_pd failed"), "{msg}");
        assert!(log().is_empty(), "nothing to destroy");
    }
}
