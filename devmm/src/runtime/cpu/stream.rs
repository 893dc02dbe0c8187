//! The CPU's one stream: host calls finish before they return, so ordering
//! operations have nothing to do.

use std::sync::{Arc, OnceLock};

use crate::device::Device;
use crate::error::{Error, Result};

use crate::stream::{Stream, StreamOps, StreamRuntime};

use super::CpuRuntime;

impl StreamOps for CpuRuntime {
    fn synchronize(&self, device: Device, handle: usize) -> Result<()> {
        super::check_device(device)?;
        check_handle(handle)
    }

    /// A no-op for any producer handle, as the seed's CPU stream is: no
    /// host work is ever queued, so there is nothing to wait for.
    fn wait(&self, device: Device, consumer: usize, _producer: usize) -> Result<()> {
        super::check_device(device)?;
        check_handle(consumer)
    }

    fn destroy(&self, _device: Device, _handle: usize) {}

    fn runtime(self: Arc<Self>) -> Result<Arc<dyn StreamRuntime>> {
        Ok(self)
    }
}

pub(super) fn check_handle(handle: usize) -> Result<()> {
    if handle == 0 {
        Ok(())
    } else {
        Err(Error::Stream {
            device: Device::CPU,
            reason: format!(
                "the CPU has a single stream with handle 0, got handle {handle}; pass 0 or a cpu stream"
            ),
        })
    }
}

impl Stream {
    /// The CPU runtime's one stream (handle 0; every operation is a no-op).
    /// Cloning it is one reference-count increment.
    pub fn cpu() -> Stream {
        static STREAM: OnceLock<Stream> = OnceLock::new();
        STREAM
            .get_or_init(|| Stream::borrowed(Device::CPU, 0, super::shared()))
            .clone()
    }
}
