//! Stream ordering through the driver: synchronize, wait through an event,
//! destroy created streams. The runtime itself is its streams' operations,
//! so every stream it makes carries it.

use std::sync::Arc;

use crate::device::Device;
use crate::error::{Error, Result};

use crate::stream::{StreamOps, StreamRuntime};

use super::{GpuRuntime, Platform, device, result};

/// Every call runs with the stream's device active.
impl<P: Platform> StreamOps for GpuRuntime<P> {
    /// Refused on a stream that is capturing a graph: its captured work
    /// has not run, and the driver would fail the call and invalidate the
    /// capture.
    fn synchronize(&self, device: Device, handle: usize) -> Result<()> {
        let _active = device::activate(&self.driver, device)?;
        if result::stream::is_capturing(&self.driver, device, handle)? {
            return Err(Error::StreamCapture {
                device,
                operation: "synchronizing the stream".into(),
                reason: "its captured work runs only when the graph is launched, so there is \
                         nothing to wait for; synchronize after ending the capture, or \
                         synchronize the stream the graph is launched on"
                    .into(),
            });
        }
        result::stream::synchronize(&self.driver, device, handle)
    }

    /// Under stream capture (the CUDA programming guide's rules): a
    /// capturing consumer may not wait on an event recorded outside its
    /// capture (the driver refuses the dependency across the boundary and
    /// invalidates the capture; an external wait node would outlive the
    /// event devmm reuses), so the producer is synchronized instead, and
    /// every launch of the graph follows its work. A consumer outside the
    /// capture waiting on a capturing producer would join the capture, which
    /// then could not end: refused.
    fn wait(&self, device: Device, consumer: usize, producer: usize) -> Result<()> {
        if consumer == producer {
            // Work on one stream is already ordered.
            return Ok(());
        }
        let (into_capture, out_of_capture) = {
            let _active = device::activate(&self.driver, device)?;
            (
                result::stream::is_capturing(&self.driver, device, consumer)?,
                result::stream::is_capturing(&self.driver, device, producer)?,
            )
        };
        // The legacy stream "captures" only as bound by a blocking stream's
        // capture, and may then not be used at all.
        let bound = |handle, capturing| capturing && result::stream::is_legacy::<P>(handle);
        if bound(consumer, into_capture) || bound(producer, out_of_capture) {
            return Err(Error::StreamCapture {
                device,
                operation: "making one stream wait for another".into(),
                reason: result::stream::LEGACY_BOUND.into(),
            });
        }
        match (into_capture, out_of_capture) {
            (true, false) => StreamOps::synchronize(self, device, producer),
            (false, true) => Err(Error::StreamCapture {
                device,
                operation: "making another stream wait for this stream".into(),
                reason: "a stream that waits on captured work joins the capture, which then \
                         cannot end until that stream's work is joined back; order the streams \
                         before the capture begins or after it ends"
                    .into(),
            }),
            (true, true) if self.captures_apart(device, consumer, producer)? => {
                Err(Error::StreamCapture {
                    device,
                    operation: "making a stream wait for a stream of another capture".into(),
                    reason: "the two captures would merge, which the driver refuses and which \
                             invalidates both; order the streams before the captures begin or \
                             after they end"
                        .into(),
                })
            }
            _ => self.wait_through_event(device, consumer, producer),
        }
    }

    fn synchronize_device(&self, device: Device) -> Result<()> {
        let _active = device::activate(&self.driver, device)?;
        result::device::synchronize(&self.driver, device)
    }

    fn is_capturing(&self, device: Device, handle: usize) -> Result<bool> {
        let _active = device::activate(&self.driver, device)?;
        result::stream::is_capturing(&self.driver, device, handle)
    }

    fn destroy(&self, device: Device, handle: usize) {
        let destroyed = device::activate(&self.driver, device)
            .and_then(|_active| result::stream::destroy(&self.driver, device, handle));
        if let Err(e) = destroyed {
            // Drop cannot fail; the stream is lost to the driver either way.
            tracing::warn!(target: "devmm::runtime", error = %e, "could not destroy a stream");
        }
    }

    fn runtime(self: Arc<Self>) -> Result<Arc<dyn StreamRuntime>> {
        Ok(self)
    }
}

impl<P: Platform> GpuRuntime<P> {
    /// Whether two capturing streams belong to different captures, whose
    /// joining the driver refuses ("it is invalid to merge two separate
    /// capture graphs"); `false` where the library cannot tell.
    fn captures_apart(&self, device: Device, a: usize, b: usize) -> Result<bool> {
        let _active = device::activate(&self.driver, device)?;
        let id = |handle| result::stream::capture_id(&self.driver, device, handle);
        Ok(matches!((id(a)?, id(b)?), (Some(a), Some(b)) if a != b))
    }
}
