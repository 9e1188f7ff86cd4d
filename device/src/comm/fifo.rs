//! The GPU side of the FIFO: pushing commands for the CPU proxy.
use crate::abi::*;
use crate::arch::*;
use crate::sync::{report_timeout, Deadline, WaitResult, WaitSite};

/// Push one command (all fields but the header's ticket are the caller's) from a single thread,
/// with the host's ticket protocol (`host/comm/fifo.rs`): a ticket is claimed only once its slot
/// is free. The thread reads the head, waits (bounded) while that ticket's slot is still taken,
/// then moves the head on with a GPU-scope compare-and-swap (retrying with the head it saw when
/// another producer won). So a push that times out has claimed nothing and leaves no hole that
/// would stop delivery of every later command. Then it writes the body and publishes the header
/// with a system-scope release store.
///
/// # Safety
/// `f` describes a live FIFO (ring and tail in host-mapped memory, head in device memory);
/// `diag` as in [`report_timeout`].
#[inline(always)]
pub unsafe fn fifo_push(f: &FifoParams, mut cmd: FifoCmd, timeout_ns: u64, diag: &Diag, site: WaitSite) -> WaitResult {
    let head = f.head as *mut u64;
    let tail = f.tail as *const u64;
    let cache = f.tail_cache as *mut u64;
    let mut ticket = ld_relaxed_gpu_u64(head);
    let mut deadline: Option<Deadline> = None;
    loop {
        // The cached tail only lags the real one, so passing this check is always safe; only when
        // the ring looks full do we pay a PCIe read of the real tail.
        if ticket >= ld_acquire_gpu_u64(cache) + f.capacity {
            let t = ld_acquire_sys_u64(tail);
            // Release: a producer that learns this tail only through the cache is still ordered
            // after the proxy's clearing of the slot (which precedes its release of `tail`).
            atom_max_acq_rel_gpu_u64(cache, t);
            if ticket >= t + f.capacity {
                let d = deadline.get_or_insert_with(Deadline::start);
                d.check(timeout_ns, diag, |waited| {
                    report_timeout(diag, site, f.tail, ticket + 1 - f.capacity, t, waited)
                })?;
                nanosleep(64);
                ticket = ld_relaxed_gpu_u64(head);
                continue;
            }
        }
        let seen = atom_cas_relaxed_gpu_u64(head, ticket, ticket + 1);
        if seen == ticket {
            break;
        }
        ticket = seen;
    }
    let slot = (f.ring as *mut u64).add(((ticket & (f.capacity - 1)) * 8) as usize);
    cmd.pushed_ns = globaltimer_ns();
    let words: [u64; 8] = bytemuck::cast(cmd);
    // Body as one 8-byte and three 16-byte stores (16-byte aligned: words 2-3, 4-5, 6-7 of the
    // 64-byte slot), fewer PCIe writes; the release store of the header orders them before it.
    st_global_u64(slot.add(1), words[1]);
    st_global_v2_u64(slot.add(2), [words[2], words[3]]);
    st_global_v2_u64(slot.add(4), [words[4], words[5]]);
    st_global_v2_u64(slot.add(6), [words[6], words[7]]);
    let header = (cmd.header & 0xffff_ffff) | ((ticket & 0xffff_ffff) << 32);
    st_release_sys_u64(slot, header);
    Ok(())
}
