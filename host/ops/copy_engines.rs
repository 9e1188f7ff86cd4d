//! The copy engines' side of a fused launch (`GemmRsOptions::engines`, `MoeOptions::engines`):
//! a stream of the op's, forked from the caller's before the kernel and joined back after it,
//! that waits on words the kernel raises and then copies what they count. One stream: on a GPU
//! whose peers sit behind NVSwitch every peer copy goes through one logical copy engine
//! whatever stream issues it (the driver maps one to all peers), so more streams add no
//! bandwidth, only pending waits for the engine's front end to switch between.
use crate::error::{invalid, Result};
use crate::Gpu;
use std::sync::atomic::{AtomicBool, Ordering::Relaxed};

/// Bytes one copy-engine copy moves (none when `bytes` is 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Span {
    pub dst: u64,
    pub src: u64,
    pub bytes: usize,
}

/// One step of the stream: wait until the device word `counter` reaches `target`, set it back
/// to zero, then each copy in turn (data, then the flags that announce it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CopyStep {
    /// The word's device address (the op's own memory; the kernel raises it).
    pub counter: u64,
    pub target: u32,
    /// Per peer: the data, then its flags.
    pub copies: Vec<(Span, Span)>,
}

/// The stream and the steps it takes behind every launch.
pub(crate) struct CopyStream {
    /// A handle of the launch's GPU with a stream of its own.
    stream: Gpu,
    /// In the order they are enqueued.
    pub steps: Vec<CopyStep>,
    /// A launch's steps were enqueued only in part, or the caller's stream could not join this
    /// one (a word may be left set, copies may still read the op's inputs): every later launch
    /// is refused.
    broken: AtomicBool,
}

impl CopyStream {
    /// A stream on `gpu`'s device for `steps`.
    pub fn new(gpu: &Gpu, steps: Vec<CopyStep>) -> Result<CopyStream> {
        Ok(CopyStream { stream: Gpu::new(gpu.info().ordinal)?, steps, broken: AtomicBool::new(false) })
    }

    /// Fork the stream from `gpu`'s (it follows what was queued before), run `launch` on `gpu`'s
    /// stream, queue every step behind it, then make `gpu`'s stream join this one. The kernel
    /// goes first: the host's enqueueing then overlaps its start, and a launch that fails
    /// leaves no step waiting for it.
    ///
    /// # Safety
    /// Every counter and span of the steps is device memory (this process's or a peer's mapped
    /// here) that stays valid until `gpu`'s stream has passed this launch; the kernel `launch`
    /// queues raises each counter to its target whatever its bounded waits do (or traps), so
    /// the stream's unbounded waits end.
    pub unsafe fn around(&self, gpu: &Gpu, launch: impl FnOnce() -> Result<()>) -> Result<()> {
        if self.broken.load(Relaxed) {
            return Err(invalid("launch", "an earlier launch was enqueued only in part: build the op again"));
        }
        let s = &self.stream;
        s.wait_for(gpu)?;
        launch()?;
        let enqueued = self.steps.iter().try_for_each(|step| {
            // SAFETY: the caller's contract.
            unsafe {
                s.wait_value_async(step.counter, step.target)?;
                s.write_value_async(step.counter, 0)?;
                for span in step.copies.iter().flat_map(|(data, flags)| [data, flags]).filter(|c| c.bytes > 0) {
                    s.copy_async(span.dst, span.src, span.bytes)?;
                }
            }
            Ok::<_, crate::Error>(())
        });
        // Joined even after a failure: copies already queued read and write the op's buffers.
        let joined = gpu.wait_for(s);
        if enqueued.is_err() || joined.is_err() {
            self.broken.store(true, Relaxed);
        }
        enqueued?;
        Ok(joined?)
    }
}
