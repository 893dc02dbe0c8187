//! Stream ordering through the driver: synchronize, wait through an event,
//! destroy created streams.

use std::fmt;
use std::sync::Arc;

use crate::device::Device;
use crate::error::Result;
use crate::runtime::driver::Driver;
use crate::stream::StreamOps;

use super::{Platform, device, result};

/// The [`StreamOps`] of a GPU runtime; every call runs with the stream's
/// device active.
pub(crate) struct GpuStreamOps<P: Platform> {
    driver: Arc<Driver<P>>,
}

impl<P: Platform> GpuStreamOps<P> {
    pub(crate) fn new(driver: Arc<Driver<P>>) -> GpuStreamOps<P> {
        GpuStreamOps { driver }
    }
}

impl<P: Platform> fmt::Debug for GpuStreamOps<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "GpuStreamOps({})", P::RUNTIME)
    }
}

impl<P: Platform> StreamOps for GpuStreamOps<P> {
    fn synchronize(&self, device: Device, handle: usize) -> Result<()> {
        let _active = device::activate(&self.driver, device)?;
        result::stream::synchronize(self.driver.table(), device, handle)
    }

    fn wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
        if consumer == producer {
            // Work on one stream is already ordered.
            return Ok(());
        }
        let _active = device::activate(&self.driver, device)?;
        result::stream::wait(self.driver.table(), device, consumer, producer)
    }

    fn destroy(&self, device: Device, handle: usize) {
        let destroyed = device::activate(&self.driver, device)
            .and_then(|_active| result::stream::destroy(self.driver.table(), device, handle));
        if let Err(e) = destroyed {
            // Drop cannot fail; the stream is lost to the driver either way.
            tracing::warn!(target: "devmm::runtime", error = %e, "could not destroy a stream");
        }
    }
}
