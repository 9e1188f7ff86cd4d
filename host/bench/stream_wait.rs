//! How soon work queued on a side stream follows a word a running kernel raises, while that
//! kernel holds every SM (as the fused kernels do): the question behind handing a fused launch's
//! NVLink bytes to the copy engines (`ops::gemm_rs`'s `engines`). `mkernel bench stream-wait`.
//!
//! The probe kernel (`mk_probe_raise`) raises a word to 1, 2, ... on a timetable and stamps each
//! raise with the global timer. Beside it a side stream reacts to each raise and records a CUDA
//! event: after a stream memory wait on the word in device memory (`cuStreamWaitValue32`), or
//! when a host thread polling the word in host-mapped memory sees it. An event's time after the
//! start event (recorded just before the launch), less its raise's time after the kernel's
//! start, is the reaction's latency plus the launch's own start-up (the same for every raise of
//! a run). A device-to-device copy within one GPU is a kernel, not the copy engines; with a
//! second GPU, [`peer_copies`] times copies into it instead: queued at once, and each behind its
//! raise's stream wait, on one stream or spread over three.
use crate::abi::ProbeRaiseParams;
use crate::gpu::{cust_err, kernels, DeviceBuffer, LaunchConfig, MappedBuffer};
use crate::{Gpu, GpuError, Result};
use cust::event::{Event, EventFlags};
use std::time::{Duration, Instant};

/// How a side stream reacts to a raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaction {
    /// A stream memory wait on the word (device memory), then the event.
    StreamWait,
    /// A host thread polls the word (host-mapped memory) and records the event.
    HostPoll,
    /// No wait: every copy into the peer queued at the launch, each followed by its event.
    PeerCopies,
    /// A stream memory wait, then the copy into the peer, then the event; raises round-robin
    /// over `streams` side streams.
    WaitPeerCopy {
        /// Side streams.
        streams: usize,
    },
}

impl Reaction {
    /// The reaction's name in the report.
    pub fn name(self) -> String {
        match self {
            Reaction::StreamWait => "stream wait".into(),
            Reaction::HostPoll => "host poll".into(),
            Reaction::PeerCopies => "peer copies, no wait".into(),
            Reaction::WaitPeerCopy { streams } => format!("wait + peer copy, {streams} stream(s)"),
        }
    }
}

/// The probe's timetable.
#[derive(Clone, Copy, Debug)]
pub struct StreamWaitProbe {
    /// Raises per run.
    pub raises: u32,
    /// Between raises.
    pub period: Duration,
}

/// Microseconds from each raise to its event, for one reaction (see the module docs).
#[derive(Clone, Debug)]
pub struct Latencies {
    /// The reaction.
    pub reaction: Reaction,
    /// Per raise, in order.
    pub us: Vec<f64>,
    /// Microseconds from the start event to the last event.
    pub span_us: f64,
}

/// The probe's buffers on the raising GPU.
struct Probe<'g> {
    gpu: &'g Gpu,
    probe: StreamWaitProbe,
    word: DeviceBuffer<u32>,
    host_word: MappedBuffer<u32>,
    stamps: DeviceBuffer<u64>,
}

impl<'g> Probe<'g> {
    fn new(gpu: &'g Gpu, probe: StreamWaitProbe) -> Result<Self> {
        Ok(Probe {
            gpu,
            probe,
            word: gpu.upload(&[0u32])?,
            host_word: MappedBuffer::<u32>::zeroed(1)?,
            stamps: gpu.upload(&vec![0u64; probe.raises as usize + 1])?,
        })
    }

    /// One run: launch the raising kernel (the word in host-mapped memory if `host`), let the
    /// side streams follow the start, call `react(raise, events)` for raises 1, 2, ... (it queues
    /// what follows each raise and records that raise's event on a side stream), then wait and
    /// turn the events into latencies.
    fn run(
        &self,
        reaction: Reaction,
        sides: &[Gpu],
        host: bool,
        mut react: impl FnMut(u32, &Event) -> Result<()>,
    ) -> Result<Latencies> {
        let (gpu, probe) = (self.gpu, self.probe);
        self.word.fill_bytes(0)?;
        self.stamps.fill_bytes(0)?;
        self.host_word.write(0, 0);
        gpu.synchronize()?;
        let word = if host { self.host_word.device_addr() } else { self.word.addr() };
        let period_ns = u32::try_from(probe.period.as_nanos()).unwrap_or(u32::MAX);
        let params = ProbeRaiseParams { word, stamps: self.stamps.addr(), raises: probe.raises, period_ns };
        gpu.make_current()?;
        let start = Event::new(EventFlags::DEFAULT).map_err(cust_err("cuEventCreate"))?;
        let events: Vec<Event> = (0..probe.raises)
            .map(|_| Event::new(EventFlags::DEFAULT).map_err(cust_err("cuEventCreate")))
            .collect::<std::result::Result<_, GpuError>>()?;
        start.record(gpu.stream()).map_err(cust_err("cuEventRecord"))?;
        for side in sides {
            side.wait_for(gpu)?;
        }
        let cfg = LaunchConfig::linear(gpu.info().sm_count, 32, 0);
        // SAFETY: the word and stamps outlive the launch (synchronised below); one CTA per SM,
        // every one resident, and the raising CTA waits for nothing.
        unsafe { gpu.launch(kernels::PROBE_RAISE, &cfg, &params)? };
        let limit = Instant::now() + probe.period * (probe.raises + 10) + Duration::from_secs(2);
        for (i, ev) in events.iter().enumerate() {
            let v = i as u32 + 1;
            if host {
                while self.host_word.read(0) < v {
                    if Instant::now() > limit {
                        return Err(GpuError::Module(format!("probe: raise {v} never seen on the host")).into());
                    }
                    std::hint::spin_loop();
                }
            }
            react(v, ev)?;
        }
        // Bounded: a side stream waits on words only the probe kernel raises.
        let left = || limit.saturating_duration_since(Instant::now()) + Duration::from_secs(1);
        for side in sides {
            side.synchronize_timeout(left())?;
        }
        gpu.synchronize_timeout(left())?;
        let t = self.stamps.to_vec()?;
        let mut us = Vec::with_capacity(events.len());
        let mut span_us = 0f64;
        for (i, ev) in events.iter().enumerate() {
            let at = ev.elapsed_time_f32(&start).map_err(cust_err("cuEventElapsedTime"))? as f64 * 1e3;
            span_us = span_us.max(at);
            us.push(at - (t[i + 1] - t[0]) as f64 / 1e3);
        }
        Ok(Latencies { reaction, us, span_us })
    }
}

/// Record `ev` on `side`'s stream.
fn record(side: &Gpu, ev: &Event) -> Result<()> {
    side.make_current()?;
    Ok(ev.record(side.stream()).map_err(cust_err("cuEventRecord"))?)
}

/// Run the probe with the stream-wait and host-poll reactions on `gpu` (see the module docs).
pub fn stream_wait(gpu: &Gpu, probe: StreamWaitProbe) -> Result<Vec<Latencies>> {
    let p = Probe::new(gpu, probe)?;
    let side = [Gpu::new(gpu.info().ordinal)?];
    let waited = p.run(Reaction::StreamWait, &side, false, |v, ev| {
        // SAFETY: the word outlives the wait (the side stream is synchronised in `run`).
        unsafe { side[0].wait_value_async(p.word.addr(), v)? };
        record(&side[0], ev)
    })?;
    let polled = p.run(Reaction::HostPoll, &side, true, |_, ev| record(&side[0], ev))?;
    Ok(vec![waited, polled])
}

/// Run the probe on `gpu` with copies of `bytes` into `peer` (another GPU) as the reactions:
/// all queued at once, then each behind its raise's stream wait on one stream, then on three.
pub fn peer_copies(gpu: &Gpu, peer: &Gpu, probe: StreamWaitProbe, bytes: usize) -> Result<Vec<Latencies>> {
    gpu.enable_peer_access(peer)?;
    let p = Probe::new(gpu, probe)?;
    let src = gpu.alloc::<u8>(bytes)?;
    let dst = peer.alloc::<u8>(bytes)?;
    let sides = (0..3).map(|_| Ok(Gpu::new(gpu.info().ordinal)?)).collect::<Result<Vec<_>>>()?;
    let copy = |side: &Gpu| -> Result<()> {
        // SAFETY: both buffers hold `bytes` and outlive the copy (the streams are synchronised
        // in `run`); peer access is enabled.
        unsafe { side.copy_async(dst.addr(), src.addr(), bytes)? };
        Ok(())
    };
    let mut out = vec![p.run(Reaction::PeerCopies, &sides[..1], false, |_, ev| {
        copy(&sides[0])?;
        record(&sides[0], ev)
    })?];
    for streams in [1, 3] {
        out.push(p.run(Reaction::WaitPeerCopy { streams }, &sides[..streams], false, |v, ev| {
            let side = &sides[v as usize % streams];
            // SAFETY: as in `stream_wait`.
            unsafe { side.wait_value_async(p.word.addr(), v)? };
            copy(side)?;
            record(side, ev)
        })?);
    }
    Ok(out)
}
