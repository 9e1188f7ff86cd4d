//! TEMPORARY instrumentation (diagnostic build, not for commit): stamps of AllGather + GEMM's
//! launches with epochs E0 and E0 + 1 in a global buffer, printed by each launch's last CTA.
use crate::arch::*;
use core::arch::asm;
use core::ptr::{addr_of_mut, read_volatile};

extern "C" {
    fn vprintf(f: *const u8, a: *const u64) -> i32;
}

pub const E0: u32 = 41;
const CAP: u32 = 12288;
static mut ST: [u64; 3 * 12288] = [0; 3 * 12288];
static mut N: u32 = 0;
static mut EXIT: [u32; 2] = [0; 2];

#[inline(always)]
unsafe fn atom_add(p: *mut u32, v: u32) -> u32 {
    let r: u32;
    asm!("atom.add.acq_rel.gpu.global.u32 {r}, [{p}], {v};", r = out(reg32) r, p = in(reg64) p, v = in(reg32) v, options(nostack));
    r
}

#[inline(always)]
pub unsafe fn stamp(epoch: u32, what: u32, cta: u32, a: u32, b: u32) {
    if epoch == E0 || epoch == E0 + 1 {
        let t = globaltimer_ns();
        let i = atom_add(addr_of_mut!(N), 1);
        if i < CAP {
            let st = addr_of_mut!(ST) as *mut u64;
            let i = 3 * i as usize;
            *st.add(i) = (epoch as u64) << 40 | (what as u64) << 32 | cta as u64;
            *st.add(i + 1) = t;
            *st.add(i + 2) = (a as u64) << 32 | b as u64;
        }
    }
}

#[inline(never)]
pub unsafe fn exit(epoch: u32, ctas: u32) {
    if epoch == E0 || epoch == E0 + 1 {
        fence_acq_rel_gpu();
        let ex = addr_of_mut!(EXIT) as *mut u32;
        let old = atom_add(ex.add((epoch - E0) as usize), 1);
        if old + 1 == ctas {
            fence_acq_rel_gpu();
            let n = read_volatile(addr_of_mut!(N)).min(CAP);
            let st = addr_of_mut!(ST) as *const u64;
            for i in 0..n as usize {
                let meta = read_volatile(st.add(3 * i));
                if (meta >> 40) as u32 == epoch {
                    let ab = read_volatile(st.add(3 * i + 2));
                    let v = [
                        epoch as u64,
                        (meta >> 32) & 0xff,
                        meta & 0xffff_ffff,
                        read_volatile(st.add(3 * i + 1)),
                        ab >> 32,
                        ab & 0xffff_ffff,
                    ];
                    vprintf(b"MKT %llu %llu %llu %llu %llu %llu\n\0".as_ptr(), v.as_ptr());
                }
            }
        }
    }
}
