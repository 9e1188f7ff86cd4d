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
//! a run). A device-to-device copy within one GPU is a kernel, not the copy engines, so copies
//! are left to the multi-GPU benches.
use crate::abi::ProbeRaiseParams;
use crate::gpu::{kernels, DeviceBuffer, LaunchConfig, MappedBuffer};
use crate::{Gpu, GpuError, Result};
use cust::event::{Event, EventFlags};
use std::time::{Duration, Instant};

/// How the side stream reacts to a raise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reaction {
    /// A stream memory wait on the word (device memory), then the event.
    StreamWait,
    /// A host thread polls the word (host-mapped memory) and records the event.
    HostPoll,
}

impl Reaction {
    /// Every reaction, in the report's order.
    pub const ALL: [Reaction; 2] = [Reaction::StreamWait, Reaction::HostPoll];

    /// The reaction's name in the report.
    pub fn name(self) -> &'static str {
        match self {
            Reaction::StreamWait => "stream wait",
            Reaction::HostPoll => "host poll",
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
}

fn cust_err(what: &'static str) -> impl Fn(cust::error::CudaError) -> GpuError {
    move |e| GpuError::Module(format!("{what}: {e}"))
}

/// Run the probe once per reaction on `gpu` (see the module docs).
pub fn stream_wait(gpu: &Gpu, probe: StreamWaitProbe) -> Result<Vec<Latencies>> {
    let side = Gpu::new(gpu.info().ordinal)?;
    let word: DeviceBuffer<u32> = gpu.upload(&[0u32])?;
    let host_word = MappedBuffer::<u32>::zeroed(1)?;
    let stamps: DeviceBuffer<u64> = gpu.upload(&vec![0u64; probe.raises as usize + 1])?;
    let period_ns = u32::try_from(probe.period.as_nanos()).unwrap_or(u32::MAX);
    let mut out = Vec::new();
    for reaction in Reaction::ALL {
        let host = reaction == Reaction::HostPoll;
        word.fill_bytes(0)?;
        stamps.fill_bytes(0)?;
        host_word.write(0, 0);
        gpu.synchronize()?;
        let addr = if host { host_word.device_addr() } else { word.addr() };
        let params = ProbeRaiseParams { word: addr, stamps: stamps.addr(), raises: probe.raises, period_ns };
        gpu.make_current()?;
        let start = Event::new(EventFlags::DEFAULT).map_err(cust_err("cuEventCreate"))?;
        let events: Vec<Event> = (0..probe.raises)
            .map(|_| Event::new(EventFlags::DEFAULT).map_err(cust_err("cuEventCreate")))
            .collect::<std::result::Result<_, GpuError>>()?;
        start.record(gpu.stream()).map_err(cust_err("cuEventRecord"))?;
        side.wait_for(gpu)?;
        let cfg = LaunchConfig::linear(gpu.info().sm_count, 32, 0);
        // SAFETY: the word and stamps outlive the launch (synchronised below); one CTA per SM,
        // every one resident, and the raising CTA waits for nothing.
        unsafe { gpu.launch(kernels::PROBE_RAISE, &cfg, &params)? };
        let limit = Instant::now() + probe.period * (probe.raises + 10) + Duration::from_secs(2);
        for (i, ev) in events.iter().enumerate() {
            let v = i as u32 + 1;
            if host {
                while host_word.read(0) < v {
                    if Instant::now() > limit {
                        return Err(GpuError::Module(format!("probe: raise {v} never seen on the host")).into());
                    }
                    std::hint::spin_loop();
                }
            } else {
                // SAFETY: the word outlives the wait (the side stream is synchronised below).
                unsafe { side.wait_value_async(word.addr(), v)? };
            }
            side.make_current()?;
            ev.record(side.stream()).map_err(cust_err("cuEventRecord"))?;
        }
        side.synchronize()?;
        gpu.synchronize()?;
        let t = stamps.to_vec()?;
        let mut us = Vec::with_capacity(events.len());
        for (i, ev) in events.iter().enumerate() {
            let ms = ev.elapsed_time_f32(&start).map_err(cust_err("cuEventElapsedTime"))? as f64;
            us.push(ms * 1e3 - (t[i + 1] - t[0]) as f64 / 1e3);
        }
        out.push(Latencies { reaction, us });
    }
    Ok(out)
}
