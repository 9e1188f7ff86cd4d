//! The CPU proxy: a thread that drains a FIFO in order, hands commands to a [`Transport`] in
//! batches, and keeps counters. Errors stop the thread and reach the host API through
//! [`Proxy::check`] / [`Proxy::shutdown`]; shutdown drains what is queued, flushes the transport
//! and joins the thread. A command that does not decode (see [`super::command`]) stops the proxy
//! with its ticket and rule; commands still in the ring at shutdown and a panicked proxy thread are
//! errors too, never a silent Ok.
use super::command::decode;
use super::error::{io, CommError, CommResult};
use super::fifo::{leftovers, Consumer, RingMemory};
use super::transport::Transport;
use crate::abi::FifoCmd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Counters of a running proxy.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Commands handed to the transport.
    pub commands: u64,
    /// Sum of those commands' `bytes` fields.
    pub bytes: u64,
    /// Batches handed to the transport (one `post` each).
    pub batches: u64,
    /// Largest batch so far, in commands.
    pub max_batch: u64,
}

#[derive(Default)]
struct Shared {
    stop: AtomicBool,
    commands: AtomicU64,
    bytes: AtomicU64,
    batches: AtomicU64,
    max_batch: AtomicU64,
    /// Flushes asked for ([`Proxy::flush`]) and the last one done: the thread flushes the
    /// transport once the ring is empty and then publishes the request it served.
    flush_asked: AtomicU64,
    flush_done: AtomicU64,
    error: Mutex<Option<String>>,
}

impl Shared {
    /// The error slot; a panic elsewhere while holding it does not hide the error.
    fn error(&self) -> MutexGuard<'_, Option<String>> {
        self.error.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn proxy_err(what: String) -> CommError {
    CommError::Transport { transport: "proxy", what }
}

/// Proxy settings.
#[derive(Clone, Copy, Debug)]
pub struct ProxyConfig {
    /// Most commands handed to the transport at once.
    pub max_batch: usize,
    /// How long shutdown waits for producers to finish a half-published batch.
    pub drain_timeout: Duration,
    /// The most shutdown takes in all: a ring that never goes quiet for `drain_timeout` (a kernel
    /// still pushing) or a transport flush that does not end is reported after it, and the
    /// thread left behind, instead of a shutdown (or a drop) that never returns.
    pub shutdown_timeout: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        Self { max_batch: 32, drain_timeout: Duration::from_millis(100), shutdown_timeout: Duration::from_secs(30) }
    }
}

/// A running proxy thread.
pub struct Proxy {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<CommResult<()>>>,
    shutdown_timeout: Duration,
}

impl Proxy {
    /// Start draining `ring` into `transport`. `max_batch` must be at least 1.
    pub fn start<R: RingMemory + 'static>(
        ring: Arc<R>,
        mut transport: Box<dyn Transport>,
        cfg: ProxyConfig,
    ) -> CommResult<Proxy> {
        if cfg.max_batch == 0 {
            let rule = "0 must be at least 1 (a proxy that takes no command delivers nothing)".into();
            return Err(CommError::InvalidArgument { arg: "max_batch", rule });
        }
        if cfg.shutdown_timeout < cfg.drain_timeout {
            let rule = format!(
                "{:?} must be at least drain_timeout ({:?}): shutdown waits that long for the ring to go quiet",
                cfg.shutdown_timeout, cfg.drain_timeout
            );
            return Err(CommError::InvalidArgument { arg: "shutdown_timeout", rule });
        }
        let shared = Arc::new(Shared::default());
        let sh = shared.clone();
        let thread = std::thread::Builder::new()
            .name("mkernel-proxy".into())
            .spawn(move || {
                let caught =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| run(&*ring, &mut *transport, cfg, &sh)));
                let r = caught.unwrap_or_else(|p| {
                    let msg = p
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| p.downcast_ref::<String>().cloned())
                        .unwrap_or_else(|| "no message".into());
                    Err(proxy_err(format!("the proxy thread panicked: {msg}")))
                });
                if let Err(e) = &r {
                    *sh.error() = Some(e.to_string());
                }
                r
            })
            .map_err(io("spawning the proxy thread"))?;
        Ok(Proxy { shared, thread: Some(thread), shutdown_timeout: cfg.shutdown_timeout })
    }

    /// Counters so far.
    pub fn stats(&self) -> ProxyStats {
        let s = &self.shared;
        ProxyStats {
            commands: s.commands.load(Ordering::Relaxed),
            bytes: s.bytes.load(Ordering::Relaxed),
            batches: s.batches.load(Ordering::Relaxed),
            max_batch: s.max_batch.load(Ordering::Relaxed),
        }
    }

    /// The proxy's error, if it stopped on one (a panic included); an error too when the thread
    /// ended without one before shutdown was asked for.
    pub fn check(&self) -> CommResult<()> {
        if let Some(e) = &*self.shared.error() {
            return Err(proxy_err(e.clone()));
        }
        let ended = self.thread.as_ref().is_some_and(|t| t.is_finished());
        if ended && !self.shared.stop.load(Ordering::Acquire) {
            return Err(proxy_err("the proxy thread ended before shutdown".into()));
        }
        Ok(())
    }

    /// Complete every command pushed before this call: once the ring is empty the thread
    /// flushes the transport (its writes landed, its deferred flags raised). Waits at most
    /// `limit`; the proxy's error if it stopped.
    pub fn flush(&self, limit: Duration) -> CommResult<()> {
        let ticket = self.shared.flush_asked.fetch_add(1, Ordering::AcqRel) + 1;
        let start = Instant::now();
        while self.shared.flush_done.load(Ordering::Acquire) < ticket {
            self.check()?;
            if self.thread.as_ref().is_none_or(|t| t.is_finished()) {
                return Err(proxy_err("flush: the proxy thread has ended".into()));
            }
            if start.elapsed() > limit {
                return Err(proxy_err(format!(
                    "flush: not done within {limit:?} (a transport flush that never returns?)"
                )));
            }
            std::thread::sleep(Duration::from_micros(100));
        }
        Ok(())
    }

    /// Drain, flush the transport, stop the thread; the final counters or the proxy's error.
    pub fn shutdown(mut self) -> CommResult<ProxyStats> {
        self.stop_and_join()?;
        Ok(self.stats())
    }

    /// Ask the thread to stop and wait for it, at most the configured `shutdown_timeout` (and
    /// a second for the thread to notice its own bound): past that the thread is left behind
    /// (it holds the ring and the transport, which therefore stay alive) and the error says so.
    fn stop_and_join(&mut self) -> CommResult<()> {
        self.shared.stop.store(true, Ordering::Release);
        let Some(thread) = self.thread.take() else {
            return Ok(());
        };
        let deadline = Instant::now() + self.shutdown_timeout + Duration::from_secs(1);
        while !thread.is_finished() {
            if Instant::now() >= deadline {
                let what = format!(
                    "the proxy thread did not end within {:?} of shutdown (a transport flush that never \
                     returned?); left running with the ring and the transport it holds",
                    self.shutdown_timeout
                );
                *self.shared.error() = Some(what.clone());
                return Err(proxy_err(what));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
        match thread.join() {
            Ok(r) => r,
            Err(_) => Err(proxy_err("the proxy thread panicked".into())),
        }
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        // Never leave the thread running unbounded, and never lose what shutdown found (commands
        // left in the ring, a flush that failed): a drop has no caller to return it to, so it
        // goes to stderr, as a transport's failed teardown does.
        if let Err(e) = self.stop_and_join() {
            eprintln!("mkernel: proxy shutdown (at drop): {e}");
        }
    }
}

/// Publish the released position: every command the proxy took (`taken`, all posted) but the
/// transport's unreleased latest ones. Only ever moves forward.
fn publish_released(ring: &dyn RingMemory, transport: &mut dyn Transport, taken: u64) -> CommResult<()> {
    let released = taken.saturating_sub(transport.unreleased()?);
    // The proxy is the only writer: a plain store when it grows (no locked read-modify-write on
    // the line the GPU polls on every idle turn). Release: a kernel that sees the position may
    // rewrite the sources.
    if released > ring.released().load(Ordering::Relaxed) {
        ring.released().store(released, Ordering::Release);
    }
    Ok(())
}

fn run(ring: &dyn RingMemory, transport: &mut dyn Transport, cfg: ProxyConfig, sh: &Shared) -> CommResult<()> {
    transport.on_proxy_thread()?;
    let mut consumer = Consumer::default();
    let mut batch: Vec<FifoCmd> = Vec::with_capacity(cfg.max_batch);
    let mut idle_since: Option<Instant> = None;
    // When the thread first saw the stop request (shutdown's bound counts from it; the flush
    // after the drain gets the drain timeout's share of it).
    let mut stop_seen: Option<Instant> = None;
    let drain_bound = cfg.shutdown_timeout.saturating_sub(cfg.drain_timeout);
    let mut idle_polls = 0u32;
    loop {
        // Read before the poll: a flush request seen here covers only commands pushed before it,
        // and those are in the ring by now, so a poll that finds it empty has taken them all.
        let flush_asked = sh.flush_asked.load(Ordering::Acquire);
        batch.clear();
        let busy = consumer.poll(ring, &mut batch, cfg.max_batch) > 0;
        if busy {
            // Commands before a bad one still go out, in order; the bad one stops the proxy.
            let first = consumer.position() - batch.len() as u64;
            let bad = batch.iter().enumerate().find_map(|(i, c)| decode(c).err().map(|e| (i, e)));
            if let Some((i, e)) = bad {
                transport.post(&batch[..i])?;
                let ticket = first + i as u64;
                return Err(proxy_err(format!("ticket {ticket}: {e}; the proxy stopped at this command")));
            }
            transport.post(&batch)?;
            publish_released(ring, transport, consumer.position())?;
            let bytes = batch.iter().fold(0u64, |a, c| a.saturating_add(c.bytes));
            sh.commands.fetch_add(batch.len() as u64, Ordering::Relaxed);
            sh.bytes.fetch_add(bytes, Ordering::Relaxed);
            sh.batches.fetch_add(1, Ordering::Relaxed);
            sh.max_batch.fetch_max(batch.len() as u64, Ordering::Relaxed);
            idle_since = None;
            idle_polls = 0;
        } else {
            transport.progress()?;
            publish_released(ring, transport, consumer.position())?;
            // Every command pushed before the request is posted (the ring was empty after it was
            // read): complete them.
            if flush_asked > sh.flush_done.load(Ordering::Relaxed) {
                transport.flush()?;
                publish_released(ring, transport, consumer.position())?;
                sh.flush_done.store(flush_asked, Ordering::Release);
            }
        }
        if sh.stop.load(Ordering::Acquire) {
            // Keep draining until the ring has been quiet for drain_timeout, but not past the
            // shutdown bound: a kernel that keeps pushing would hold shutdown forever.
            let asked = *stop_seen.get_or_insert_with(Instant::now);
            let quiet = !busy && idle_since.get_or_insert_with(Instant::now).elapsed() >= cfg.drain_timeout;
            if quiet || asked.elapsed() >= drain_bound {
                transport.flush()?;
                let left = leftovers(ring, consumer.position());
                return match (quiet, left) {
                    (true, None) => Ok(()),
                    (true, Some(what)) => {
                        Err(proxy_err(format!("shutdown after {:?} quiet: {what}", cfg.drain_timeout)))
                    }
                    (false, left) => Err(proxy_err(format!(
                        "shutdown: commands still arriving {:?} after it was asked for (a kernel still pushing?), \
                         {} taken; {}",
                        asked.elapsed(),
                        consumer.position(),
                        left.unwrap_or_else(|| "none left in the ring".into())
                    ))),
                };
            }
        }
        if busy {
            continue;
        }
        // Spin briefly for latency, then yield so an idle proxy does not own a core.
        idle_polls = idle_polls.saturating_add(1);
        if idle_polls > 4096 {
            std::thread::yield_now();
        } else {
            std::hint::spin_loop();
        }
    }
}
