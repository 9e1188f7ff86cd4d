//! Symmetric buffers: the same-size allocation on every rank, each mapped into every other rank
//! on the same host through CUDA IPC, so kernels can write peers' memory directly over NVLink.
//! Creating one is collective (all ranks, same size); it checks P2P access and ends with a
//! barrier, so every buffer is zeroed and mapped before any kernel uses it.
use super::bootstrap::Bootstrap;
use super::error::{CommError, CommResult};
use super::world::World;
use crate::gpu::{check_raw, DeviceBuffer, Gpu};
use cust_raw as sys;

/// CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS
const LAZY_PEER: u32 = 1;

/// A symmetric buffer (see the module docs).
pub struct SymmBuffer {
    local: DeviceBuffer<u8>,
    /// Address of each rank's buffer as mapped in this process (0: not on this host).
    addrs: Vec<u64>,
    /// Each rank's GPU UUID (None: not on this host).
    gpus: Vec<Option<[u8; 16]>>,
    /// This rank's GPU UUID.
    gpu: [u8; 16],
    opened: Vec<u64>,
}

/// The UUID of GPU `device`: what identifies a GPU across processes, whatever each process's
/// device numbering (`CUDA_VISIBLE_DEVICES`).
fn gpu_uuid(device: u32) -> CommResult<[u8; 16]> {
    let mut dev = 0;
    let mut uuid = sys::CUuuid { bytes: [0; 16] };
    // SAFETY: plain queries writing through valid pointers.
    unsafe {
        check_raw("cuDeviceGet", sys::cuDeviceGet(&mut dev, device as i32))?;
        check_raw("cuDeviceGetUuid", sys::cuDeviceGetUuid_v2(&mut uuid, dev))?;
    }
    Ok(uuid.bytes.map(|b| b as u8))
}

/// Where each field of a rank's bootstrap record starts: bytes (u64), device ordinal (u32), IPC
/// handle (64 bytes), GPU UUID (16 bytes), then the host name to the end.
const AT_DEVICE: usize = 8;
const AT_HANDLE: usize = AT_DEVICE + 4;
const AT_UUID: usize = AT_HANDLE + 64;
const AT_HOST: usize = AT_UUID + 16;

fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".into())
}

impl SymmBuffer {
    /// Allocate `bytes` (zeroed) on every rank and map the ranks of this host into each other.
    pub fn new(gpu: &Gpu, boot: &mut Bootstrap, world: &World, bytes: usize) -> CommResult<SymmBuffer> {
        let local = gpu.alloc::<u8>(bytes.max(1))?;
        local.fill_bytes(0)?;
        let mut handle = sys::CUipcMemHandle { reserved: [0; 64] };
        // SAFETY: local is a live cuMemAlloc allocation of this context.
        check_raw("cuIpcGetMemHandle", unsafe { sys::cuIpcGetMemHandle(&mut handle, local.addr()) })?;
        let host = hostname();
        let uuid = gpu_uuid(world.device)?;
        // The record (field offsets: AT_*).
        let mut blob = Vec::new();
        blob.extend_from_slice(&(bytes as u64).to_le_bytes());
        blob.extend_from_slice(&world.device.to_le_bytes());
        blob.extend_from_slice(bytemuck::cast_slice(&handle.reserved));
        blob.extend_from_slice(&uuid);
        blob.extend_from_slice(host.as_bytes());
        let all = boot.all_gather(&blob)?;
        let mut addrs = vec![0u64; world.world_size as usize];
        let mut gpus = vec![None; world.world_size as usize];
        let mut opened = Vec::new();
        addrs[world.rank as usize] = local.addr();
        gpus[world.rank as usize] = Some(uuid);
        let result = (|| {
            for (r, b) in all.iter().enumerate() {
                if r as u32 == world.rank {
                    continue;
                }
                if b.len() < AT_HOST {
                    return Err(CommError::Bootstrap {
                        rank: world.rank,
                        what: format!("malformed symmetric-buffer record from rank {r}"),
                    });
                }
                let their_bytes = u64::from_le_bytes(b[..AT_DEVICE].try_into().unwrap());
                if their_bytes != bytes as u64 {
                    return Err(CommError::InvalidArgument {
                        arg: "bytes",
                        rule: format!(
                            "rank {r} allocated {their_bytes} bytes, rank {} {bytes}: symmetric buffers must match",
                            world.rank
                        ),
                    });
                }
                if b[AT_HOST..] != *host.as_bytes() {
                    continue; // another host: reached by the inter-node transport, not mapped here
                }
                gpus[r] = Some(b[AT_UUID..AT_HOST].try_into().unwrap());
                let their_dev = u32::from_le_bytes(b[AT_DEVICE..AT_HANDLE].try_into().unwrap());
                if their_dev != world.device {
                    let mut can = 0;
                    let (mut me, mut them) = (0, 0);
                    // SAFETY: plain queries on valid ordinals.
                    unsafe {
                        check_raw("cuDeviceGet", sys::cuDeviceGet(&mut me, world.device as i32))?;
                        check_raw("cuDeviceGet", sys::cuDeviceGet(&mut them, their_dev as i32))?;
                        check_raw("cuDeviceCanAccessPeer", sys::cuDeviceCanAccessPeer(&mut can, me, them))?;
                    }
                    if can == 0 {
                        return Err(CommError::NoPeerAccess { from: world.device, to: their_dev });
                    }
                }
                let mut h = sys::CUipcMemHandle { reserved: [0; 64] };
                h.reserved.copy_from_slice(bytemuck::cast_slice(&b[AT_HANDLE..AT_UUID]));
                let mut ptr = 0;
                // SAFETY: the handle came from a live allocation of another process on this host.
                check_raw("cuIpcOpenMemHandle", unsafe { sys::cuIpcOpenMemHandle_v2(&mut ptr, h, LAZY_PEER) })?;
                opened.push(ptr);
                addrs[r] = ptr;
            }
            Ok(())
        })();
        let buf = SymmBuffer { local, addrs, gpus, gpu: uuid, opened };
        result?;
        boot.barrier()?;
        Ok(buf)
    }

    /// This rank's buffer.
    pub fn local(&self) -> &DeviceBuffer<u8> {
        &self.local
    }

    /// Device address of this rank's buffer.
    pub fn addr(&self) -> u64 {
        self.local.addr()
    }

    /// Address of rank `r`'s buffer as mapped here (None: on another host).
    pub fn peer(&self, r: u32) -> Option<u64> {
        self.addrs.get(r as usize).copied().filter(|&a| a != 0)
    }

    /// Whether rank `r`'s buffer is on this rank's GPU (ranks sharing one GPU). Compared by GPU
    /// UUID, not by a pointer attribute: for memory opened through CUDA IPC the device-ordinal
    /// attribute named the opening process's own GPU here (2 GPUs, every peer looked local).
    pub fn on_this_gpu(&self, r: u32) -> bool {
        self.gpus.get(r as usize).copied().flatten() == Some(self.gpu)
    }

    /// Size in bytes.
    pub fn len(&self) -> usize {
        self.local.len()
    }

    /// True when empty (never: at least one byte is allocated).
    pub fn is_empty(&self) -> bool {
        self.local.is_empty()
    }
}

impl Drop for SymmBuffer {
    fn drop(&mut self) {
        for &p in &self.opened {
            // After a stuck stream a close could wait behind the stuck kernel: left open, counted
            // as the device buffers' frees are.
            if crate::gpu::leak_instead() {
                continue;
            }
            // SAFETY: opened by cuIpcOpenMemHandle in this process, closed once.
            if let Err(e) = check_raw("cuIpcCloseMemHandle", unsafe { sys::cuIpcCloseMemHandle(p) }) {
                // Recorded for `gpu::take_drop_errors`, as a failed free is: a drop cannot return it.
                crate::gpu::record_drop_failure("closing a peer's mapped heap", e);
            }
        }
    }
}
