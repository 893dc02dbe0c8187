//! What the facade fills in when the caller names no device, stream or
//! resource: the one place above the core model that asks the global
//! registries (the current resource per device, the runtimes).
//!
//! The model (streams, buffers, tensors, DLPack) never asks a global:
//! a stream carries its runtime. Only the convenience entry points
//! (`empty`'s options, `DeviceBuffer::on_device`) come here.

use std::sync::Arc;

use crate::device::Device;
use crate::error::Result;
use crate::resource::MemoryResource;
use crate::stream::Stream;

/// The device `empty` allocates on when neither a device nor a resource
/// is given: the first device of the `DEVMM_RUNTIME` runtime, else the CPU.
pub(crate) fn device() -> Result<Device> {
    crate::runtime::default_device()
}

/// The default stream of `device`'s runtime; the CPU's without a lookup.
pub(crate) fn stream(device: Device) -> Result<Stream> {
    crate::runtime::stream_for(device, None)
}

/// The current resource of `device` (the registry's, else its runtime's
/// default).
pub(crate) fn resource(device: Device) -> Result<Arc<dyn MemoryResource>> {
    crate::registry::get_current_memory_resource(device)
}
