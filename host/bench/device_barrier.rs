//! A rank group whose barrier also lines the GPUs up (`--device-barrier`).
//!
//! After the host barrier the ranks leave it tens of microseconds apart, and each launches its
//! timed work as it leaves. Work that waits for its peers (every fused op, our all-gather) then
//! counts the spread in its time, while work that does not (the copy engines' copies) does not.
//! Here each rank also queues a 16-byte all-gather on its stream after the host barrier: it ends
//! on a GPU only once every rank's has started and written, so the timed work queued behind it
//! starts within a few microseconds on every GPU.
use super::Group;
use crate::comm::communicator::Communicator;
use crate::ops::allgather::{AllGather, AllGatherOptions, NvlinkCopy};
use crate::{Gpu, Result};

/// The harness's rank group over a communicator, optionally lining up the GPUs at each barrier
/// (see the module docs).
pub struct RankGroup<'c> {
    comm: &'c Communicator,
    gpu: &'c Gpu,
    device: Option<AllGather<'c>>,
}

impl<'c> RankGroup<'c> {
    /// Collective: every rank calls it with the same `device_barrier`.
    pub fn new(comm: &'c Communicator, gpu: &'c Gpu, device_barrier: bool) -> Result<Self> {
        let opts = AllGatherOptions { intra_ctas: Some(1), copy: NvlinkCopy::Lsu, ..Default::default() };
        let device = if device_barrier { Some(AllGather::new(comm, gpu, 16, opts)?) } else { None };
        Ok(Self { comm, gpu, device })
    }
}

impl Group for RankGroup<'_> {
    fn barrier(&mut self) -> Result<()> {
        if let Some(ag) = &self.device {
            // The last lining-up all-gather is done (the harness synchronised): report a device
            // timeout in it, or a proxy error, rather than time behind it.
            ag.wait(self.gpu)?;
        }
        Communicator::barrier(self.comm)?;
        if let Some(ag) = &self.device {
            ag.launch(self.gpu)?;
        }
        Ok(())
    }
    fn max(&mut self, v: f64) -> Result<f64> {
        Group::max(&mut self.comm, v)
    }
}
