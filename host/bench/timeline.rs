//! Launch timelines from a diagnostic module (the device crate's `trace` feature, built with
//! `MKERNEL_DEVICE_FEATURES=trace`; see `mkernel_device::abi::trace`): select launches by their
//! epoch, let them run, read back what each CTA stamped, and summarise it. The product's module
//! has no buffers, and selecting there is a typed error.
use crate::abi::trace::{self, CAPACITY, MAX_CTAS, WORDS};
use crate::error::{invalid, Result};
use crate::gpu::DeviceSlice;
use crate::Gpu;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// One stamp: launch `epoch`'s `event` in CTA `cta` at `t_ns` (`%globaltimer`), with its two
/// arguments (see the events in `abi::trace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Stamp {
    /// The launch's epoch (its op's launch count, from 1).
    pub epoch: u32,
    /// What happened (`abi::trace::START` ...).
    pub event: u32,
    /// The CTA (`blockIdx.x`).
    pub cta: u32,
    /// `%globaltimer`, ns (it ticks about every microsecond on Hopper).
    pub t_ns: u64,
    /// The event's first argument.
    pub a: u32,
    /// The event's second argument.
    pub b: u32,
}

impl Stamp {
    /// The stamp kept in `words` (three words, as the device writes them).
    pub fn decode(words: [u64; 3]) -> Stamp {
        Stamp {
            epoch: (words[0] >> 40) as u32,
            event: (words[0] >> 32) as u32 & 0xff,
            cta: words[0] as u32,
            t_ns: words[1],
            a: (words[2] >> 32) as u32,
            b: words[2] as u32,
        }
    }
}

/// The module's timeline buffers on one GPU.
pub struct Timeline<'g> {
    select: DeviceSlice<'g, u32>,
    count: DeviceSlice<'g, u32>,
    buffer: DeviceSlice<'g, u64>,
    exits: DeviceSlice<'g, u32>,
}

impl<'g> Timeline<'g> {
    /// The buffers of `gpu`'s module; a typed error where it was built without them.
    pub fn of(gpu: &'g Gpu) -> Result<Timeline<'g>> {
        let missing =
            || invalid("trace", "this build's module keeps no timelines: build it with MKERNEL_DEVICE_FEATURES=trace");
        let select = gpu.module_global::<u32>(trace::SELECT)?.ok_or_else(missing)?;
        let count = gpu.module_global::<u32>(trace::COUNT)?.ok_or_else(missing)?;
        let buffer = gpu.module_global::<u64>(trace::BUFFER)?.ok_or_else(missing)?;
        let exits = gpu.module_global::<u32>(trace::EXITS)?.ok_or_else(missing)?;
        if select.len() != 2
            || count.len() != 1
            || buffer.len() != (WORDS * CAPACITY) as usize
            || exits.len() != MAX_CTAS as usize
        {
            return Err(invalid("trace", "the module's timeline buffers are not this build's sizes"));
        }
        Ok(Timeline { select, count, buffer, exits })
    }

    /// Trace the launches with epochs `first..first + launches` (of every instrumented kernel;
    /// epochs count from 1 per op) and forget earlier stamps, and the warps' exit counts a
    /// launch that stopped early may have left. Call between launches.
    pub fn select(&self, first: u32, launches: u32) -> Result<()> {
        if first == 0 {
            return Err(invalid("trace_epochs", "epochs count from 1"));
        }
        self.count.copy_from(&[0])?;
        self.exits.fill_bytes(0)?;
        Ok(self.select.copy_from(&[first, launches])?)
    }

    /// Every stamp kept since [`Timeline::select`], in the order they were taken, and how many
    /// were taken in all (more than kept once the buffer is full). Call after the launches ended.
    pub fn read(&self) -> Result<(Vec<Stamp>, u32)> {
        let taken = self.count.to_vec()?[0];
        let kept = taken.min(CAPACITY) as usize;
        let words = self.buffer.slice(0..kept * WORDS as usize).to_vec()?;
        let stamps = words.chunks_exact(3).map(|w| Stamp::decode([w[0], w[1], w[2]])).collect();
        Ok((stamps, taken))
    }
}

/// Median of a sorted slice (0 for none).
fn mid(v: &[u64]) -> u64 {
    if v.is_empty() {
        0
    } else {
        v[v.len() / 2]
    }
}

/// What a set of waits (ns) added up to: in all and longest (us), and how many passed 5 us.
struct Waits {
    total_us: f64,
    longest_us: f64,
    over_5us: usize,
}

impl Waits {
    fn of(ns: &[u64]) -> Self {
        Waits {
            total_us: ns.iter().sum::<u64>() as f64 / 1e3,
            longest_us: ns.iter().max().copied().unwrap_or(0) as f64 / 1e3,
            over_5us: ns.iter().filter(|&&n| n > 5_000).count(),
        }
    }
}

/// A text summary per traced launch, times in us from its first CTA's start: how many CTAs
/// started; per role (`role_names[role]`), when its CTAs ended (first, median, last); the tiles
/// claimed, how many waited more than 5 us for their rows, the longest wait and when the last
/// tile's rows were in; when each CTA's first tile had its rows; when the forward CTAs saw the
/// last chunk; when the inter-send thread had
/// pushed its last WRITE and saw them released.
pub fn summary(stamps: &[Stamp], role_names: &[&str]) -> String {
    let mut by_epoch: BTreeMap<u32, Vec<&Stamp>> = BTreeMap::new();
    for s in stamps {
        by_epoch.entry(s.epoch).or_default().push(s);
    }
    let mut out = String::new();
    for (epoch, ss) in by_epoch {
        let Some(t0) = ss.iter().filter(|s| s.event == trace::START).map(|s| s.t_ns).min() else {
            let _ = writeln!(out, "launch {epoch}: {} stamps, no CTA start", ss.len());
            continue;
        };
        let us = |t: u64| t.saturating_sub(t0) as f64 / 1e3;
        let roles: BTreeMap<u32, u32> = ss.iter().filter(|s| s.event == trace::START).map(|s| (s.cta, s.a)).collect();
        let _ = writeln!(out, "launch {epoch}: {} CTAs started", roles.len());
        // A CTA's role (u32::MAX when it stamped no start) and a role's name.
        let role_of = |cta: u32| roles.get(&cta).copied().unwrap_or(u32::MAX);
        let name_of = |role: u32| role_names.get(role as usize).copied().unwrap_or("other");
        let mut ends: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for s in ss.iter().filter(|s| s.event == trace::END) {
            ends.entry(role_of(s.cta)).or_default().push(s.t_ns);
        }
        // First, median and last of some times (none empty).
        let spread = |t: &mut Vec<u64>| {
            t.sort_unstable();
            format!("first {:.1} median {:.1} last {:.1} us", us(t[0]), us(mid(t)), us(t[t.len() - 1]))
        };
        for (role, mut t) in ends {
            let _ = writeln!(out, "  {} CTAs: {} ended, {}", name_of(role), t.len(), spread(&mut t));
        }
        let claims: BTreeMap<(u32, u32), u64> =
            ss.iter().filter(|s| s.event == trace::TILE_CLAIMED).map(|s| ((s.cta, s.a), s.t_ns)).collect();
        let ready: Vec<&&Stamp> = ss.iter().filter(|s| s.event == trace::TILE_READY).collect();
        // The CTA that ended last, and the last tile it took: on what the launch's end waited.
        if let Some(last) = ss.iter().filter(|s| s.event == trace::END).max_by_key(|s| s.t_ns) {
            let role = name_of(role_of(last.cta));
            let _ = write!(out, "  last to end: CTA {} ({role}) at {:.1} us", last.cta, us(last.t_ns));
            let mine = ready.iter().filter(|s| s.cta == last.cta).max_by_key(|s| s.t_ns);
            match mine {
                Some(r) => {
                    let claimed = claims.get(&(r.cta, r.a)).copied().unwrap_or(r.t_ns);
                    let _ = writeln!(
                        out,
                        "; its last tile (walk position {}, m {} n {}) claimed at {:.1}, rows in at {:.1} us",
                        r.a,
                        r.b >> 16,
                        r.b & 0xffff,
                        us(claimed),
                        us(r.t_ns)
                    );
                }
                None => out.push('\n'),
            }
        }
        if !ready.is_empty() {
            let waits: Vec<u64> = ready
                .iter()
                .map(|s| s.t_ns.saturating_sub(claims.get(&(s.cta, s.a)).copied().unwrap_or(s.t_ns)))
                .collect();
            let last = ready.iter().map(|s| s.t_ns).max().unwrap_or(t0);
            // Who ran the tiles: CTAs of other roles join the compute CTAs in some kernels.
            let mut by_role: BTreeMap<u32, usize> = BTreeMap::new();
            for &(cta, _) in claims.keys() {
                *by_role.entry(role_of(cta)).or_default() += 1;
            }
            let by_role: Vec<String> = by_role.iter().map(|(&r, n)| format!("{} {n}", name_of(r))).collect();
            let w = Waits::of(&waits);
            let _ = writeln!(
                out,
                "  tiles: {} claimed ({}), {} waited over 5 us for their rows (longest {:.1} us, {:.1} us in all); last rows in at {:.1} us",
                claims.len(),
                by_role.join(", "),
                w.over_5us,
                w.longest_us,
                w.total_us,
                us(last)
            );
        }
        // When the GEMM got going: each CTA's first tile with its rows in (a fused MoE's start-up:
        // routing, layout, and the rows of the first wave).
        let mut first_ready: BTreeMap<u32, u64> = BTreeMap::new();
        for s in &ready {
            let t = first_ready.entry(s.cta).or_insert(s.t_ns);
            *t = (*t).min(s.t_ns);
        }
        let mut first_ready: Vec<u64> = first_ready.into_values().collect();
        if !first_ready.is_empty() {
            let _ = writeln!(out, "  first tiles ready (each CTA's first): {}", spread(&mut first_ready));
        }
        // The pace of the tiles: from one claim to the CTA's next.
        let mut by_cta: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for (&(cta, _), &t) in &claims {
            by_cta.entry(cta).or_default().push(t);
        }
        let mut periods: Vec<u64> = Vec::new();
        for t in by_cta.values_mut() {
            t.sort_unstable();
            periods.extend(t.windows(2).map(|w| w[1] - w[0]));
        }
        if !periods.is_empty() {
            periods.sort_unstable();
            let _ = writeln!(
                out,
                "  tile period (a CTA's claim to its next): median {:.1}, 90th percentile {:.1} us",
                mid(&periods) as f64 / 1e3,
                periods[periods.len() * 9 / 10] as f64 / 1e3
            );
        }
        let seen: Vec<u64> = ss.iter().filter(|s| s.event == trace::CHUNK_SEEN).map(|s| s.t_ns).collect();
        if let (Some(first), Some(last)) = (seen.iter().min(), seen.iter().max()) {
            let _ = writeln!(
                out,
                "  forwarded chunks: {} seen, first at {:.1}, last at {:.1} us",
                seen.len(),
                us(*first),
                us(*last)
            );
        }
        for (event, what) in [(trace::SENT, "every WRITE pushed"), (trace::RELEASED, "every WRITE released")] {
            if let Some(s) = ss.iter().find(|s| s.event == event) {
                let _ = writeln!(out, "  inter-send: {what} at {:.1} us (FIFO position {})", us(s.t_ns), s.a);
            }
        }
        // Every other event (the MoE's steps): how often, first and last.
        let shown = [
            trace::START,
            trace::END,
            trace::TILE_CLAIMED,
            trace::TILE_READY,
            trace::CHUNK_SEEN,
            trace::SENT,
            trace::RELEASED,
        ];
        // Waits and copies that stamp their duration: how many, how long in all and at most.
        let mut waits: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for s in ss.iter().filter(|s| trace::is_duration(s.event)) {
            waits.entry(s.event).or_default().push(s.b as u64);
        }
        for (event, ns) in waits {
            let w = Waits::of(&ns);
            let _ = writeln!(
                out,
                "  {}: {} stamps, {:.1} us in all, {} over 5 us, longest {:.1} us",
                trace::name(event),
                ns.len(),
                w.total_us,
                w.over_5us,
                w.longest_us
            );
        }
        let mut rest: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
        for s in ss.iter().filter(|s| !shown.contains(&s.event) && !trace::is_duration(s.event)) {
            rest.entry(s.event).or_default().push(s.t_ns);
        }
        for (event, mut t) in rest {
            t.sort_unstable();
            let _ = writeln!(
                out,
                "  {}: {} stamps, first at {:.1}, last at {:.1} us",
                trace::name(event),
                t.len(),
                us(t[0]),
                us(t[t.len() - 1])
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(epoch: u32, event: u32, cta: u32, t: u64, a: u32, b: u32) -> [u64; 3] {
        [(epoch as u64) << 40 | (event as u64) << 32 | cta as u64, t, (a as u64) << 32 | b as u64]
    }

    #[test]
    fn stamps_decode_as_the_device_packs_them() {
        let s = Stamp::decode(words(41, trace::TILE_READY, 131, 1_795_873_935_848_505_344, 2047, 127 << 16 | 15));
        assert_eq!(
            s,
            Stamp {
                epoch: 41,
                event: trace::TILE_READY,
                cta: 131,
                t_ns: 1_795_873_935_848_505_344,
                a: 2047,
                b: 127 << 16 | 15
            }
        );
    }

    #[test]
    fn the_summary_reports_ends_waits_and_sends_per_launch() {
        let base = 1_000_000_000u64;
        let w = |event, cta, t_us: u64, a, b| Stamp::decode(words(7, event, cta, base + t_us * 1000, a, b));
        let stamps = [
            w(trace::START, 0, 0, 0, 0),
            w(trace::START, 1, 1, 0, 0),
            w(trace::START, 2, 1, 2, 0),
            w(trace::TILE_CLAIMED, 0, 2, 0, 0),
            w(trace::TILE_READY, 0, 3, 0, 0),
            w(trace::TILE_CLAIMED, 1, 2, 1, 1),
            w(trace::TILE_READY, 1, 22, 1, 1),
            // A CTA of another role joins the tiles.
            w(trace::TILE_CLAIMED, 2, 30, 2, 2),
            w(trace::TILE_READY, 2, 31, 2, 2),
            w(trace::SENT, 2, 40, 9, 0),
            w(trace::RELEASED, 2, 60, 9, 0),
            w(trace::END, 2, 61, 0, 0),
            w(trace::END, 0, 100, 0, 0),
            w(trace::END, 1, 120, 0, 0),
            w(trace::LAID_OUT, 1, 45, 0, 0),
            w(trace::PULLED, 1, 70, 1, 0),
            w(trace::PULLED, 0, 50, 1, 0),
            // CTA 0's second tile, 30 us after its first; a wait that stamps its duration.
            w(trace::TILE_CLAIMED, 0, 32, 3, 3),
            w(trace::TILE_READY, 0, 33, 3, 3),
            w(trace::SUM_WAITED, 0, 90, 3, 7_500),
            w(trace::SUM_WAITED, 1, 95, 1, 500),
        ];
        let text = summary(&stamps, &["compute", "intra-comm", "inter-send"]);
        assert!(text.contains("launch 7: 3 CTAs started"), "{text}");
        assert!(text.contains("compute CTAs: 2 ended, first 100.0 median 120.0 last 120.0 us"), "{text}");
        assert!(text.contains("inter-send CTAs: 1 ended, first 61.0"), "{text}");
        assert!(text.contains("tiles: 4 claimed (compute 3, inter-send 1), 1 waited over 5 us for their rows (longest 20.0 us, 23.0 us in all); last rows in at 33.0 us"), "{text}");
        assert!(
            text.contains("tile period (a CTA's claim to its next): median 30.0, 90th percentile 30.0 us"),
            "{text}"
        );
        assert!(text.contains("sum_waited: 2 stamps, 8.0 us in all, 1 over 5 us, longest 7.5 us"), "{text}");
        // CTA 0 first ready at 3 us, CTA 1 at 22, CTA 2 at 31.
        assert!(text.contains("first tiles ready (each CTA's first): first 3.0 median 22.0 last 31.0 us"), "{text}");
        assert!(text.contains("every WRITE pushed at 40.0 us (FIFO position 9)"), "{text}");
        assert!(text.contains("every WRITE released at 60.0 us"), "{text}");
        assert!(text.contains("laid_out: 1 stamps, first at 45.0, last at 45.0 us"), "{text}");
        assert!(
            text.contains(
                "last to end: CTA 1 (compute) at 120.0 us; its last tile (walk position 1, m 0 n 1) claimed at 2.0, rows in at 22.0 us"
            ),
            "{text}"
        );
        assert!(text.contains("pulled: 2 stamps, first at 50.0, last at 70.0 us"), "{text}");
    }
}
