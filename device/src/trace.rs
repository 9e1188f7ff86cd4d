//! Launch timelines for diagnosis (the `trace` feature; the events and the module's symbols are in
//! [`crate::abi::trace`]). A kernel stamps events of the launches whose epoch the host selected
//! into a global buffer: `%globaltimer`, one atomic and three stores per event, no call and no
//! barrier, so a traced launch runs as an untraced one does. Call sites sit behind `if ON`:
//! without the feature none of this reaches the module, whose PTX stays as it was.

/// Whether this module records timelines (the device crate's `trace` feature).
pub const ON: bool = cfg!(feature = "trace");

#[cfg(feature = "trace")]
mod imp {
    use crate::abi::trace::*;
    use crate::arch::{atom_add_relaxed_gpu_u32 as atom_add, globaltimer_ns};
    use core::ptr::{addr_of, addr_of_mut, read_volatile, write_volatile};

    // The names are the symbols of `abi::trace`, which the host looks up.
    #[no_mangle]
    static mut MK_TRACE_SELECT: [u32; 2] = [0; 2];
    #[no_mangle]
    static mut MK_TRACE_COUNT: u32 = 0;
    #[no_mangle]
    static mut MK_TRACE_BUFFER: [u64; (WORDS * CAPACITY) as usize] = [0; (WORDS * CAPACITY) as usize];
    #[no_mangle]
    static mut MK_TRACE_EXITS: [u32; MAX_CTAS as usize] = [0; MAX_CTAS as usize];

    #[inline(always)]
    pub fn traced(epoch: u32) -> bool {
        // SAFETY: two words of this module, written by the host between launches.
        let (first, n) = unsafe {
            let sel = addr_of!(MK_TRACE_SELECT) as *const u32;
            (read_volatile(sel), read_volatile(sel.add(1)))
        };
        epoch.wrapping_sub(first) < n
    }

    #[inline(always)]
    pub unsafe fn stamp(epoch: u32, event: u32, cta: u32, a: u32, b: u32) {
        if traced(epoch) {
            let t = globaltimer_ns();
            let i = atom_add(addr_of_mut!(MK_TRACE_COUNT), 1);
            if i < CAPACITY {
                let at = (addr_of_mut!(MK_TRACE_BUFFER) as *mut u64).add((WORDS * i) as usize);
                *at = ((epoch & EPOCH_MASK) as u64) << 40 | (event as u64) << 32 | cta as u64;
                *at.add(1) = t;
                *at.add(2) = (a as u64) << 32 | b as u64;
            }
        }
    }

    #[inline(always)]
    pub unsafe fn warp_done(epoch: u32, cta: u32, warps: u32) {
        if traced(epoch) && cta < MAX_CTAS {
            let slot = (addr_of_mut!(MK_TRACE_EXITS) as *mut u32).add(cta as usize);
            if atom_add(slot, 1) + 1 == warps {
                write_volatile(slot, 0);
                stamp(epoch, END, cta, 0, 0);
            }
        }
    }
}

/// Stamp `event` of CTA `cta` with its two arguments, if launch `epoch` is one the host selected.
///
/// # Safety
/// Any thread may call it; the buffer's slots are claimed atomically.
#[inline(always)]
pub unsafe fn stamp(epoch: u32, event: u32, cta: u32, a: u32, b: u32) {
    #[cfg(feature = "trace")]
    imp::stamp(epoch, event, cta, a, b);
    #[cfg(not(feature = "trace"))]
    let _ = (epoch, event, cta, a, b);
}

/// Stamp this CTA's `START` (`role`: its role and index, as `RoleSplit::role_of` gives them).
///
/// # Safety
/// As [`stamp`]; one thread of the CTA calls it.
#[inline(always)]
pub unsafe fn start(epoch: u32, role: Option<(crate::sched::Role, u32)>, rank: u32) {
    stamp(
        epoch,
        crate::abi::trace::START,
        crate::arch::block_idx_x_here(),
        role.map_or(u32::MAX, |r| r.0 as u32),
        rank,
    );
}

/// This thread's warp is done with the launch; the CTA's last warp stamps its `END` and clears the
/// count for the next traced launch.
///
/// # Safety
/// As [`stamp`]; every thread of the CTA calls it exactly once per launch (lane 0 of each warp
/// counts it).
#[inline(always)]
pub unsafe fn warp_done(epoch: u32) {
    #[cfg(feature = "trace")]
    if crate::arch::lane_id() == 0 {
        let warps = crate::arch::block_dim_x() / 32;
        imp::warp_done(epoch, crate::arch::block_idx_x_here(), warps);
    }
    #[cfg(not(feature = "trace"))]
    let _ = epoch;
}
