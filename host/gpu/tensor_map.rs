//! TMA tensor maps (`CUtensorMap`), encoded on the host with `cuTensorMapEncodeTiled`.
use super::driver::cuda12;
use super::error::{check, GpuError, Result};
use bytemuck::{Pod, Zeroable};

/// An encoded tensor map: 128 opaque bytes, 64-byte aligned. Kernels take a pointer to a copy in
/// device global memory (see `Gpu::upload_tensor_maps`).
#[repr(C, align(64))]
#[derive(Clone, Copy, Debug, PartialEq, Pod, Zeroable)]
pub struct TensorMap {
    /// The driver's encoding; only the driver and the TMA unit read it.
    pub opaque: [u64; 16],
}
const _: () = assert!(std::mem::size_of::<TensorMap>() == 128);

/// Element type of a tensor map.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TmaDtype {
    /// 8-bit unsigned.
    U8,
    /// 16-bit unsigned.
    U16,
    /// 32-bit unsigned.
    U32,
    /// IEEE single precision.
    F32,
    /// bfloat16.
    Bf16,
}

impl TmaDtype {
    fn code(self) -> u32 {
        // CUtensorMapDataType
        match self {
            TmaDtype::U8 => 0,
            TmaDtype::U16 => 1,
            TmaDtype::U32 => 2,
            TmaDtype::F32 => 7,
            TmaDtype::Bf16 => 9,
        }
    }

    /// Bytes per element.
    pub fn bytes(self) -> u64 {
        match self {
            TmaDtype::U8 => 1,
            TmaDtype::U16 | TmaDtype::Bf16 => 2,
            TmaDtype::U32 | TmaDtype::F32 => 4,
        }
    }
}

/// How much TMA loads of a map make L2 fetch per miss (`CUtensorMapL2promotion`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum L2Promotion {
    /// 128-byte fills: a box's row of up to 128 bytes, no more.
    B128,
    /// 256-byte fills: a 128-byte box row also brings in the next 128 bytes of the tensor row,
    /// which a GEMM streaming a K-major operand reads with its next k-block. Measured on H200
    /// (docs/PERF.md) for the small-M GEMM's operands.
    B256,
}

impl L2Promotion {
    fn code(self) -> u32 {
        match self {
            L2Promotion::B128 => 2,
            L2Promotion::B256 => 3,
        }
    }
}

/// Shared-memory swizzle of the box.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Swizzle {
    /// No swizzle: the box lands in shared memory row after row.
    None,
    /// 32-byte swizzle: the inner box is at most 32 bytes.
    B32,
    /// 64-byte swizzle: the inner box is at most 64 bytes.
    B64,
    /// 128-byte swizzle, the GEMM's operand layout for wgmma: the inner box is at most 128 bytes
    /// (64 bf16).
    B128,
}

impl Swizzle {
    fn code(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 1,
            Swizzle::B64 => 2,
            Swizzle::B128 => 3,
        }
    }

    fn span(self) -> Option<u64> {
        match self {
            Swizzle::None => None,
            Swizzle::B32 => Some(32),
            Swizzle::B64 => Some(64),
            Swizzle::B128 => Some(128),
        }
    }
}

/// A row-major 2-D tensor in global memory and the box TMA moves.
#[derive(Clone, Copy, Debug)]
pub struct Tile2d {
    /// Device address of element (0, 0): 16-byte aligned.
    pub base: u64,
    /// Element type.
    pub dtype: TmaDtype,
    /// Tensor size as `[inner (contiguous), outer]` elements.
    pub dims: [u64; 2],
    /// Bytes between consecutive rows (multiple of 16).
    pub row_stride_bytes: u64,
    /// Box size as `[inner, outer]` elements (each 1..=256).
    pub box_dims: [u32; 2],
    /// How the box is laid out in shared memory; it bounds the inner box's bytes.
    pub swizzle: Swizzle,
    /// L2 fill size of the map's loads.
    pub promotion: L2Promotion,
}

fn bad(arg: &'static str, rule: String) -> GpuError {
    GpuError::InvalidArgument { arg, rule }
}

impl Tile2d {
    /// Check TMA's rules, naming the broken one.
    pub fn validate(&self) -> Result<()> {
        let eb = self.dtype.bytes();
        if !self.base.is_multiple_of(16) {
            return Err(bad("tensor_map.base", format!("address {:#x} must be 16-byte aligned", self.base)));
        }
        for (i, &d) in self.dims.iter().enumerate() {
            if d == 0 || d > (1 << 32) {
                return Err(bad("tensor_map.dims", format!("dimension {i} is {d}; must be in 1..=2^32")));
            }
        }
        if !self.row_stride_bytes.is_multiple_of(16) || self.row_stride_bytes >= (1 << 40) {
            return Err(bad(
                "tensor_map.row_stride_bytes",
                format!("{} must be a multiple of 16 below 2^40", self.row_stride_bytes),
            ));
        }
        if self.row_stride_bytes < self.dims[0] * eb {
            return Err(bad(
                "tensor_map.row_stride_bytes",
                format!("{} is shorter than a row of {} elements", self.row_stride_bytes, self.dims[0]),
            ));
        }
        for (i, &b) in self.box_dims.iter().enumerate() {
            if b == 0 || b > 256 {
                return Err(bad("tensor_map.box_dims", format!("box dimension {i} is {b}; must be in 1..=256")));
            }
        }
        let inner_bytes = self.box_dims[0] as u64 * eb;
        if !inner_bytes.is_multiple_of(16) {
            return Err(bad(
                "tensor_map.box_dims",
                format!("inner box of {inner_bytes} bytes must be a multiple of 16"),
            ));
        }
        if let Some(span) = self.swizzle.span() {
            if inner_bytes > span {
                return Err(bad(
                    "tensor_map.box_dims",
                    format!("inner box of {inner_bytes} bytes exceeds the {span}-byte swizzle span"),
                ));
            }
        }
        Ok(())
    }

    /// Bytes of one box in shared memory.
    pub fn box_bytes(&self) -> u32 {
        self.box_dims[0] * self.box_dims[1] * self.dtype.bytes() as u32
    }

    /// Validate and encode. The driver must be initialised (any `Gpu` exists).
    pub fn encode(&self) -> Result<TensorMap> {
        self.validate()?;
        encode_tiled(
            self.base,
            self.dtype,
            &self.dims,
            &[self.row_stride_bytes],
            &self.box_dims,
            self.swizzle,
            self.promotion,
        )
    }
}

/// A rank-4 tensor in global memory (dimension 0 contiguous, the others at any 16-byte-multiple
/// strides, in any order) and the box TMA moves: what attention's `[B, S, H, D]` and
/// `[B, H, S, D]` tensors are, so that a box never crosses a head or a batch entry.
#[derive(Clone, Copy, Debug)]
pub struct Tile4d {
    /// Device address of element (0, 0, 0, 0): 16-byte aligned.
    pub base: u64,
    /// Element type.
    pub dtype: TmaDtype,
    /// Tensor size per dimension, innermost (contiguous) first.
    pub dims: [u64; 4],
    /// Bytes between consecutive indices of dimensions 1, 2 and 3.
    pub strides_bytes: [u64; 3],
    /// Box size per dimension (each 1..=256).
    pub box_dims: [u32; 4],
    /// How the box is laid out in shared memory; it bounds the inner box's bytes.
    pub swizzle: Swizzle,
}

impl Tile4d {
    /// Check TMA's rules, naming the broken one.
    pub fn validate(&self) -> Result<()> {
        // The two innermost dimensions follow the rank-2 rules (alignment, inner box, swizzle).
        Tile2d {
            base: self.base,
            dtype: self.dtype,
            dims: [self.dims[0], self.dims[1]],
            row_stride_bytes: self.strides_bytes[0],
            box_dims: [self.box_dims[0], self.box_dims[1]],
            swizzle: self.swizzle,
            promotion: L2Promotion::B128,
        }
        .validate()?;
        for i in 2..4 {
            let (d, st, b) = (self.dims[i], self.strides_bytes[i - 1], self.box_dims[i]);
            if d == 0 || d > (1 << 32) {
                return Err(bad("tensor_map.dims", format!("dimension {i} is {d}; must be in 1..=2^32")));
            }
            if !st.is_multiple_of(16) || st >= (1 << 40) {
                return Err(bad(
                    "tensor_map.strides_bytes",
                    format!("stride of dimension {i} is {st}; must be a multiple of 16 below 2^40"),
                ));
            }
            if b == 0 || b > 256 {
                return Err(bad("tensor_map.box_dims", format!("box dimension {i} is {b}; must be in 1..=256")));
            }
        }
        Ok(())
    }

    /// Bytes of one box in shared memory.
    pub fn box_bytes(&self) -> u32 {
        self.box_dims.iter().product::<u32>() * self.dtype.bytes() as u32
    }

    /// Validate and encode. The driver must be initialised (any `Gpu` exists).
    pub fn encode(&self) -> Result<TensorMap> {
        self.validate()?;
        encode_tiled(
            self.base,
            self.dtype,
            &self.dims,
            &self.strides_bytes,
            &self.box_dims,
            self.swizzle,
            L2Promotion::B128,
        )
    }
}

/// Something [`crate::Gpu::upload_tensor_maps`] can encode.
pub trait EncodeTensorMap {
    /// Validate and encode.
    fn encode_map(&self) -> Result<TensorMap>;
}

impl EncodeTensorMap for Tile2d {
    fn encode_map(&self) -> Result<TensorMap> {
        self.encode()
    }
}

impl EncodeTensorMap for Tile4d {
    fn encode_map(&self) -> Result<TensorMap> {
        self.encode()
    }
}

/// `cuTensorMapEncodeTiled` for a validated tensor of rank `dims.len()` (`strides` has one entry
/// fewer), element strides 1, no interleave, L2 promotion `promotion`, zero fill out of bounds.
fn encode_tiled(
    base: u64,
    dtype: TmaDtype,
    dims: &[u64],
    strides: &[u64],
    box_dims: &[u32],
    swizzle: Swizzle,
    promotion: L2Promotion,
) -> Result<TensorMap> {
    debug_assert!(strides.len() + 1 == dims.len() && box_dims.len() == dims.len());
    let api = cuda12()?;
    let mut map = TensorMap::zeroed();
    let elem_strides = [1u32; 5];
    // SAFETY: every pointer refers to a live local array of at least `dims.len()` (strides: one
    // fewer) entries, the rank the call names.
    check("cuTensorMapEncodeTiled", unsafe {
        (api.tensor_map_encode_tiled)(
            (&mut map as *mut TensorMap).cast(),
            dtype.code(),
            dims.len() as u32,
            base as *mut _,
            dims.as_ptr(),
            strides.as_ptr(),
            box_dims.as_ptr(),
            elem_strides.as_ptr(),
            0, // no interleave
            swizzle.code(),
            promotion.code(),
            0, // out-of-bounds elements read as zero
        )
    })?;
    Ok(map)
}
