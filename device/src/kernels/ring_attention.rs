//! Ring attention in one persistent launch (see [`RingAttnParams`] for the protocol): attention
//! CTAs run the flash-attention pieces over `world` steps, each step's K/V read from where it
//! lies (this rank's own, then the receive slots in turn); comm CTAs pass each step's K/V on to
//! the next rank while the attention CTAs work on it, then claim attention units themselves
//! (units come from a ticket counter, so their SMs are not idle for the rest of the launch:
//! measured on 2 x H200, the four SMs were up to 3% of the ring's rate). A slot is rewritten
//! only after its reader said it is done (`free`), and read only after its writer said it
//! landed (`data`).
use crate::abi::*;
use crate::arch::*;
use crate::attention::{forfeit, run_cta, KvSteps};
use crate::comm::nvlink::{copy_block, BulkRing};
use crate::comm::signal::{last_arriver, last_arriver_gpu, launch_epoch, signal, signal_gpu};
use crate::comm::{fifo_push, fifo_quiet, signal_remote};
use crate::sched::Role;
use crate::sync::{Bound, WaitResult};

/// The attention CTAs' view of the ring.
struct RingSteps<'a> {
    p: &'a RingAttnParams,
    epoch: u32,
    b: Bound<'a>,
}

/// Raise flag word `idx` of neighbour `to` to `epoch`: `mapped` is its flags over NVLink, or 0
/// when it is on another node (then a SIGNAL through the proxy).
#[inline(always)]
unsafe fn raise(p: &RingAttnParams, mapped: u64, to: u32, idx: u32, epoch: u32, b: &Bound<'_>) {
    if mapped != 0 {
        signal((mapped as *mut u32).add(idx as usize), epoch);
    } else {
        // A full FIFO that never drains already reported; nothing more to do here.
        let _ = signal_remote(&p.fifo, to, p.flags_heap_off + 4 * idx as u64, epoch, b);
    }
}

impl KvSteps for RingSteps<'_> {
    #[inline(always)]
    fn count(&self) -> u32 {
        self.p.world
    }

    #[inline(always)]
    fn split(&self, tiles: u32) -> u32 {
        // Reused slots need every tile to finish a step before a later one arrives.
        if self.p.reused(1) {
            tiles
        } else {
            self.p.split_tiles
        }
    }

    #[inline(always)]
    fn epoch(&self) -> u32 {
        self.epoch
    }

    #[inline(always)]
    fn maps(&self, s: u32) -> (u64, u64) {
        let pair = if s == 0 { 0 } else { 1 + self.p.slot(s) };
        (self.p.kv_maps + 256 * pair as u64, self.p.kv_maps + 256 * pair as u64 + 128)
    }

    #[inline(always)]
    fn k_pos(&self, s: u32) -> SeqPos {
        self.p.positions(self.p.source(s))
    }

    #[inline(always)]
    unsafe fn wait_ready(&self, s: u32, b: &Bound<'_>) -> WaitResult {
        if s == 0 {
            return Ok(());
        }
        let r = b.flag((self.p.flags as *const u32).add(RingAttnParams::data(s) as usize), self.epoch, s);
        // The slot was written by a peer's bulk copies or the proxy; TMA reads it next.
        fence_proxy_async_global();
        r
    }

    #[inline(always)]
    unsafe fn before_merge(&self, s: u32, part: u32, b: &Bound<'_>) -> WaitResult {
        // Raised to `(epoch - 1) * world + s + 1` after step `s`: wait for step `s - 1`'s.
        // Written by this GPU's CTAs only: GPU scope.
        let flag = (self.p.attn.tile_flags as *const u32).add(part as usize);
        b.flag_gpu(flag, self.epoch.wrapping_sub(1).wrapping_mul(self.p.world).wrapping_add(s), part)
    }

    #[inline(always)]
    unsafe fn after_store(&self, s: u32, part: u32) {
        // The running output was written with plain stores and is read by this GPU only.
        let flag = (self.p.attn.tile_flags as *mut u32).add(part as usize);
        signal_gpu(flag, self.epoch.wrapping_sub(1).wrapping_mul(self.p.world).wrapping_add(s + 1));
    }

    #[inline(always)]
    unsafe fn part_done(&self, s: u32, parts: u32) {
        // Only a slot that a later step reuses is given back (step 0 read this rank's own K/V,
        // which nobody rewrites during the launch): the last of the step's parts tells the
        // previous rank. The count is among this GPU's CTAs; `raise` publishes to the previous
        // rank itself.
        if self.p.reused(s) && last_arriver_gpu((self.p.counters as *mut u32).add(s as usize), parts, self.epoch) {
            release(self.p, s, self.epoch, &self.b);
        }
    }
}

/// One half of giving the slot of step `s` back to the previous rank: its reading (the last
/// attention part) or, when that K/V is passed on ([`RingAttnParams::forwards`]), its sending
/// (the last comm CTA's copy, or the next node's word that the proxy's WRITE arrived). The
/// second half raises `free(s)`: before it, the previous rank could overwrite a slot that the
/// copy or the proxy still reads. Nothing to do for a slot no later step reuses.
#[inline(always)]
unsafe fn release(p: &RingAttnParams, s: u32, epoch: u32, b: &Bound<'_>) {
    if !p.reused(s) {
        return;
    }
    let gate = (p.counters as *mut u32).add((2 * p.world + s) as usize);
    if !p.forwards(s) || last_arriver_gpu(gate, 2, epoch) {
        raise(p, p.prev_flags, p.prev, p.free(s), epoch, b);
    }
}

/// Step `s`'s K/V landed here: a previous rank on another node that sent it from a receive slot
/// waits for this before giving that slot back (see [`release`]).
#[inline(always)]
unsafe fn acknowledge(p: &RingAttnParams, s: u32, epoch: u32, b: &Bound<'_>) {
    if p.prev_flags == 0 && s >= 2 {
        raise(p, 0, p.prev, p.landed(s - 1), epoch, b);
    }
}

/// Wait until the next rank (on another node) says the K/V sent from the slot of step `s`
/// landed, then give the slot back ([`release`]). Thread 0 of comm CTA 0; false when the wait
/// gave up (reported).
#[inline(always)]
unsafe fn landed_then_release(p: &RingAttnParams, s: u32, epoch: u32, b: &Bound<'_>) -> bool {
    let ok = b.flag((p.flags as *const u32).add(p.landed(s) as usize), epoch, p.next).is_ok();
    if ok {
        release(p, s, epoch, b);
    }
    ok
}

/// Comm CTA `idx` of `ctas`: for each step but the last, wait until the K/V in hand is here and
/// the next rank's slot is free, then send it there (a share of it per CTA over NVLink; all of it
/// in one proxy WRITE to another node), and raise the next rank's `data` flag. Returns thread
/// 0's copy ring, for [`BulkRing::hand_over`].
#[inline(always)]
unsafe fn send(p: &RingAttnParams, epoch: u32, idx: u32, ctas: u32, b: &Bound<'_>) -> Option<BulkRing> {
    let tid = thread_idx_x();
    let flags = p.flags as *const u32;
    let mut ring = if tid == 0 { Some(BulkRing::new(dyn_smem_base())) } else { None };
    let mut failed = false;
    if idx == 0 && tid == 0 {
        raise(p, p.prev_flags, p.prev, RingAttnParams::READY, epoch, b);
    }
    // Proxy sends only: the step whose forwarded slot waits for the next node's `landed` word.
    // The wait comes one step late, after this step's own arrival was acknowledged: the next
    // node acknowledges only once its sender reaches that step, so waiting at once, on a ring
    // whose every hop crosses nodes, would close a cycle of waits around it.
    let mut unlanded = None;
    let mut through = 0;
    for s in 0..p.world - 1 {
        if tid == 0 && !failed {
            // What we send has arrived (step 0 sends our own K/V) ...
            if s > 0 {
                failed |= b.flag(flags.add(RingAttnParams::data(s) as usize), epoch, s).is_err();
                fence_proxy_async_global();
                if idx == 0 && !failed {
                    acknowledge(p, s, epoch, b);
                }
            }
            if let Some(q) = unlanded.take().filter(|_| !failed) {
                failed |= !landed_then_release(p, q, epoch, b);
            }
            // ... and the next rank no longer reads the slot: it entered this launch (for the
            // first use of each slot), or it finished the step that last read it.
            failed |= b.flag(flags.add(p.send_gate(s) as usize), epoch, p.next).is_err();
        }
        sync_threads(); // nobody writes before thread 0 saw the slot free
        let (src, src_off) = if s == 0 {
            (p.kv_local, p.kv_local_heap_off)
        } else {
            let at = p.slot(s) as u64 * p.kv_bytes;
            (p.slots + at, p.slots_heap_off + at)
        };
        let dst_off = p.slot(s + 1) as u64 * p.kv_bytes;
        if p.next_slots != 0 {
            // Over NVLink: this CTA's share, 16-byte aligned.
            let share = (p.kv_bytes / ctas.max(1) as u64).div_ceil(16) * 16;
            let lo = (share * idx as u64).min(p.kv_bytes);
            let hi = (lo + share).min(p.kv_bytes);
            let ring_ref = if failed { None } else { ring.as_mut() };
            let ok = copy_block(src, p.next_slots + dst_off, (lo, hi), true, ring_ref, b, s, (tid, block_dim_x()));
            failed |= !ok;
            let counter = (p.counters as *mut u32).add((p.world + s) as usize);
            if tid == 0 && !failed && last_arriver(counter, ctas, epoch) {
                signal((p.next_flags as *mut u32).add(RingAttnParams::data(s + 1) as usize), epoch);
                if p.forwards(s) {
                    release(p, s, epoch, b);
                }
            }
        } else if idx == 0 && tid == 0 && !failed {
            let cmd = FifoCmd {
                header: FifoCmd::header_word(OP_WRITE, 1, p.next, 0),
                src: FifoCmd::loc(BUF_HEAP, src_off),
                dst: FifoCmd::loc(BUF_HEAP, p.slots_heap_off + dst_off),
                bytes: p.kv_bytes,
                flag: FifoCmd::loc(BUF_HEAP, p.flags_heap_off + 4 * RingAttnParams::data(s + 1) as u64),
                flag_value: epoch as u64,
                ..Default::default()
            };
            match fifo_push(&p.fifo, cmd, b.timeout_ns, b.diag, b.site(p.next, WAIT_FLAG)) {
                Ok(ticket) => through = ticket + 1,
                Err(()) => failed = true,
            }
            // The proxy reads the slot until the WRITE is done: the next rank says when it landed
            // (waited for in the next step, or below).
            if p.forwards(s) {
                unlanded = Some(s);
            }
        }
    }
    // The last step's K/V is not passed on, so the loop above did not wait for it; the previous
    // rank on another node still needs to hear that it landed. Then the last forwarded slot.
    let last = p.world - 1;
    if idx == 0 && tid == 0 && !failed && p.prev_flags == 0 && last >= 2 {
        failed |= b.flag(flags.add(RingAttnParams::data(last) as usize), epoch, last).is_err();
        if !failed {
            acknowledge(p, last, epoch, b);
        }
    }
    if let Some(q) = unlanded.filter(|_| !failed) {
        // A wait that gives up has reported; the slot is then never given back.
        landed_then_release(p, q, epoch, b);
    }
    if !failed {
        // The first WRITE read the caller's K/V: the launch ends after every WRITE read its slot.
        let _ = fifo_quiet(&p.fifo, through, b, p.next);
    }
    ring
}

#[inline(always)]
unsafe fn ring_attention<const D: u32>(p: &RingAttnParams) {
    let tid = thread_idx_x();
    let total = p.attn_ctas + p.comm_ctas;
    // Every thread that waits on or raises a flag needs the epoch: the two producer threads, the
    // consumers' thread 0s and the comm CTAs' thread 0. One CTA-wide read of the counter per CTA.
    let epoch_slot = dyn_smem_base() + crate::kernels_info::attention::ring_smem_bytes(D) - 16;
    if tid == 0 {
        st_shared_u32(epoch_slot, launch_epoch(p.launches as *mut u64, total));
    }
    sync_threads();
    let epoch = ld_shared_u32(epoch_slot);
    let bound =
        |role: Role| Bound { timeout_ns: p.attn.timeout_ns, diag: &p.attn.diag, rank: p.rank, role: role as u32 };
    let cta = block_idx_x();
    let mut join = true;
    if cta >= p.attn_ctas {
        let role = if p.next_slots != 0 { Role::IntraComm } else { Role::InterSend };
        let ring = send(p, epoch, cta - p.attn_ctas, p.comm_ctas, &bound(role));
        // Every send of this CTA is done: it claims attention units like the others (every CTA
        // of the launch draws tickets, so the counter's per-launch count includes it), unless
        // its shared memory may still take a stray copy.
        join = BulkRing::hand_over(ring, epoch_slot + 4);
    }
    let steps = RingSteps { p, epoch, b: bound(Role::Compute) };
    if join {
        run_cta::<D, _>(&p.attn, &steps, total, bound(Role::Compute));
    } else if tid == 0 {
        forfeit::<D, _>(&p.attn, &steps, total);
    }
}

/// Ring attention, head dimension 64.
///
/// # Safety
/// Launched only by its host op (host/ops/), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_ring_attention_d64(p: RingAttnParams) {
    crate::launch_bounds!(512, 1);
    ring_attention::<64>(&p);
}

/// Ring attention, head dimension 128.
///
/// # Safety
/// Launched only by its host op (host/ops/), which sizes the grid and the shared memory as this
/// kernel expects and makes every address in `p` valid for the launch.
#[no_mangle]
pub unsafe extern "ptx-kernel" fn mk_ring_attention_d128(p: RingAttnParams) {
    crate::launch_bounds!(384, 1);
    ring_attention::<128>(&p);
}
