//! Stream ordering through the driver: synchronize, wait through an event,
//! destroy created streams. The runtime itself is its streams' operations,
//! so every stream it makes carries it.

use std::sync::Arc;

use crate::device::Device;
use crate::error::Result;
use crate::runtime::DeviceRuntime;
use crate::stream::StreamOps;

use super::{GpuRuntime, Platform, device, result};

/// Every call runs with the stream's device active.
impl<P: Platform> StreamOps for GpuRuntime<P> {
    fn synchronize(&self, device: Device, handle: usize) -> Result<()> {
        let _active = device::activate(&self.driver, device)?;
        result::stream::synchronize(&self.driver, device, handle)
    }

    fn wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
        if consumer == producer {
            // Work on one stream is already ordered.
            return Ok(());
        }
        self.wait_through_event(device, consumer, producer)
    }

    fn destroy(&self, device: Device, handle: usize) {
        let destroyed = device::activate(&self.driver, device)
            .and_then(|_active| result::stream::destroy(&self.driver, device, handle));
        if let Err(e) = destroyed {
            // Drop cannot fail; the stream is lost to the driver either way.
            tracing::warn!(target: "devmm::runtime", error = %e, "could not destroy a stream");
        }
    }

    fn runtime(self: Arc<Self>) -> Result<Arc<dyn DeviceRuntime>> {
        Ok(self)
    }
}
