//! Shared-memory tile layouts and wgmma descriptors (pure integer logic, host-testable).
//!
//! Every operand tile is made of 128-byte rows (64 bf16) written by TMA with 128-byte swizzle:
//! inside each 1024-byte block of 8 rows, the 16-byte chunk `j` of row `r` lands at chunk
//! `j ^ (r % 8)`. Blocks are 1024-byte aligned, so the swizzle is a pure function of the offset.

/// Bytes in one swizzle row (64 bf16).
pub const SW128_ROW_BYTES: u32 = 128;
/// Bytes in one swizzle atom (8 rows): also the required alignment of a tile.
pub const SW128_ATOM_BYTES: u32 = 1024;
/// bf16 elements in one swizzle row.
pub const SW128_ROW_ELEMS: u32 = 64;

/// Byte offset of byte `byte` (0..128) of row `row` inside a 128-byte-swizzled tile.
#[inline(always)]
pub const fn swizzle128(row: u32, byte: u32) -> u32 {
    row * SW128_ROW_BYTES + ((((byte >> 4) ^ (row & 7)) << 4) | (byte & 15))
}

/// A wgmma shared-memory matrix descriptor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SmemDesc(pub u64);

impl SmemDesc {
    /// Descriptor for a 128-byte-swizzled operand at shared address `addr` (1024-byte aligned,
    /// or advanced from such an address inside its first row), with leading / stride byte
    /// offsets `lbo` / `sbo` (multiples of 16).
    #[inline(always)]
    pub const fn sw128(addr: u32, lbo: u32, sbo: u32) -> Self {
        let a = ((addr >> 4) & 0x3fff) as u64;
        let l = ((lbo >> 4) & 0x3fff) as u64;
        let s = ((sbo >> 4) & 0x3fff) as u64;
        // bits 0-13 start, 16-29 LBO, 32-45 SBO, 49-51 base offset (0: aligned), 62-63 swizzle
        // mode (1 = 128-byte swizzle).
        Self(a | (l << 16) | (s << 32) | (1u64 << 62))
    }

    /// A K-major operand: rows along M (or N) of 64 K-elements, 8-row groups `1024` bytes apart.
    /// (The leading offset is unused for swizzled K-major layouts; 16 is the canonical value.)
    #[inline(always)]
    pub const fn k_major(addr: u32) -> Self {
        Self::sw128(addr, 16, SW128_ATOM_BYTES)
    }

    /// An MN-major operand stored as chunks of 64 (MN) x `k` rows, `chunk_bytes` apart along MN:
    /// row `kk` of a chunk holds 64 consecutive MN elements of K index `kk`.
    #[inline(always)]
    pub const fn mn_major(addr: u32, chunk_bytes: u32) -> Self {
        Self::sw128(addr, chunk_bytes, SW128_ATOM_BYTES)
    }

    /// The same descriptor moved `bytes` (a multiple of 16) further into shared memory.
    #[inline(always)]
    pub const fn advance(self, bytes: u32) -> Self {
        Self(self.0 + (bytes >> 4) as u64)
    }
}

/// Start-address step between consecutive k16 slices of a K-major tile (16 bf16 = 32 bytes).
pub const K16_STEP_K_MAJOR: u32 = 32;
/// Start-address step between consecutive k16 slices of an MN-major tile (16 rows of 128 bytes).
pub const K16_STEP_MN_MAJOR: u32 = 16 * SW128_ROW_BYTES;

/// Row and column of accumulator element `d[idx]` held by thread `t` (0..128) of a warpgroup
/// after an m64nNk16 wgmma (see `arch::wgmma`).
#[inline(always)]
pub const fn wgmma_acc_coord(t: u32, idx: u32) -> (u32, u32) {
    let w = t / 32;
    let l = t % 32;
    let j = idx / 4;
    let i = idx % 4;
    (16 * w + l / 4 + 8 * (i / 2), 8 * j + 2 * (l % 4) + (i % 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn swizzle_is_a_permutation_of_each_atom() {
        let mut seen = [false; 1024];
        for row in 0..8 {
            for byte in (0..128).step_by(16) {
                let o = swizzle128(row, byte) as usize;
                assert!(!seen[o], "row {row} byte {byte} collides");
                seen[o] = true;
            }
        }
        assert_eq!(swizzle128(0, 16), 16);
        assert_eq!(swizzle128(1, 0), 128 + 16);
        assert_eq!(swizzle128(9, 5), 9 * 128 + 16 + 5);
    }

    #[test]
    fn descriptor_fields() {
        let d = SmemDesc::sw128(0x4400, 8192, 1024);
        assert_eq!(d.0 & 0x3fff, 0x440);
        assert_eq!((d.0 >> 16) & 0x3fff, 512);
        assert_eq!((d.0 >> 32) & 0x3fff, 64);
        assert_eq!(d.0 >> 62, 1);
        assert_eq!(d.advance(32).0 & 0x3fff, 0x442);
    }

    #[test]
    fn accumulator_coords_cover_the_tile_once() {
        let mut seen = [[false; 256]; 64];
        for t in 0..128 {
            for idx in 0..128 {
                let (r, c) = wgmma_acc_coord(t, idx);
                assert!(!seen[r as usize][c as usize]);
                seen[r as usize][c as usize] = true;
            }
        }
        assert!(seen.iter().all(|r| r.iter().all(|&x| x)));
    }
}
