//! SIGINT / SIGTERM / SIGHUP seen by a running launcher: while any launch runs, these signals set
//! a flag (the handler does nothing else: async-signal-safe) instead of killing the launcher, so
//! the launch loop can kill every rank's process group before it returns. The previous handlers
//! are restored when the last launch ends.
use super::error::{CommError, CommResult};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Mutex;

const SIGNALS: [libc::c_int; 3] = [libc::SIGINT, libc::SIGTERM, libc::SIGHUP];

static SEEN: AtomicI32 = AtomicI32::new(0);

/// Launches running, and the handlers they replaced.
static USERS: Mutex<(usize, Vec<(libc::c_int, libc::sigaction)>)> = Mutex::new((0, Vec::new()));

extern "C" fn on_signal(sig: libc::c_int) {
    SEEN.store(sig, Ordering::SeqCst);
}

/// Handlers installed for as long as this lives.
pub(super) struct SignalGuard;

impl SignalGuard {
    pub(super) fn install() -> CommResult<SignalGuard> {
        let mut users = USERS.lock().unwrap_or_else(|p| p.into_inner());
        if users.0 == 0 {
            SEEN.store(0, Ordering::SeqCst);
            for sig in SIGNALS {
                // SAFETY: a zeroed sigaction is a valid "no flags, empty mask" value; the handler
                // only stores to an atomic, which is async-signal-safe; `old` is written by the
                // call.
                unsafe {
                    let mut new: libc::sigaction = std::mem::zeroed();
                    new.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as usize;
                    libc::sigemptyset(&mut new.sa_mask);
                    let mut old: libc::sigaction = std::mem::zeroed();
                    if libc::sigaction(sig, &new, &mut old) != 0 {
                        let source = std::io::Error::last_os_error();
                        // Put back the handlers this call already replaced: no guard will.
                        for (sig, old) in users.1.drain(..) {
                            libc::sigaction(sig, &old, std::ptr::null_mut());
                        }
                        return Err(CommError::Io {
                            context: format!("installing a handler for signal {sig}"),
                            source,
                        });
                    }
                    users.1.push((sig, old));
                }
            }
        }
        users.0 += 1;
        Ok(SignalGuard)
    }

    /// The last signal seen since the first running launch started.
    pub(super) fn seen(&self) -> Option<i32> {
        Some(SEEN.load(Ordering::SeqCst)).filter(|&s| s != 0)
    }
}

impl Drop for SignalGuard {
    fn drop(&mut self) {
        let mut users = USERS.lock().unwrap_or_else(|p| p.into_inner());
        users.0 -= 1;
        if users.0 == 0 {
            for (sig, old) in users.1.drain(..) {
                // SAFETY: restoring the action saved by install().
                unsafe { libc::sigaction(sig, &old, std::ptr::null_mut()) };
            }
        }
    }
}
