//! Managed memory hints: prefetching a managed buffer to a device or the
//! host ([`prefetch`], `cudaMemPrefetchAsync` / `hipMemPrefetchAsync`) and
//! advising the driver how it will be used ([`advise`], `cudaMemAdvise` /
//! `hipMemAdvise`). Only managed memory takes them: its resource answers
//! [`MemoryResource::managed_memory`]; any other buffer is refused with
//! an error naming its resource chain.
//!
//! ```
//! use devmm::{Advice, DeviceBuffer, MallocMemoryResource};
//! use std::sync::Arc;
//! let host = DeviceBuffer::new(64, Arc::new(MallocMemoryResource::new()), &devmm::Stream::cpu())?;
//! // Host memory is not managed memory: the refusal says what to use.
//! let refused = devmm::prefetch(&host, devmm::Device::CPU, None).unwrap_err();
//! assert!(refused.to_string().contains("CudaManagedMemoryResource"), "{refused}");
//! assert_eq!("set_read_mostly".parse::<Advice>()?, Advice::SetReadMostly);
//! assert!("read_fast".parse::<Advice>().is_err());
//! # Ok::<(), devmm::Error>(())
//! ```

use crate::buffer::DeviceBuffer;
use crate::device::Device;
use crate::error::{Error, Result};
use crate::managed_memory::{Advice, ManagedMemory};
use crate::resource::{MemoryResource, resource_chain};
use crate::stream::Stream;

/// The refusal of `operation` on `what` (a buffer, a resource) whose
/// memory from `resource` is not managed memory.
pub(crate) fn not_managed(operation: &str, what: &str, resource: &dyn MemoryResource) -> Error {
    Error::Refused {
        reason: format!(
            "{operation} needs managed memory, but {what} comes from {}; allocate it from a \
             managed resource (CudaManagedMemoryResource, HipManagedMemoryResource)",
            resource_chain(resource)
        ),
    }
}

/// The managed memory behind `buffer`, or an error naming its resource.
fn managed_of<'a>(buffer: &'a DeviceBuffer, operation: &str) -> Result<&'a dyn ManagedMemory> {
    buffer.check_open()?;
    let resource: &dyn MemoryResource = &**buffer.resource();
    resource.managed_memory().ok_or_else(|| {
        let what = format!(
            "this {}-byte buffer on {}",
            buffer.nbytes(),
            buffer.device()
        );
        not_managed(operation, &what, resource)
    })
}

/// Prefetches `buffer`'s managed memory to `target` (a device of its
/// runtime such as `cuda:1`, or [`Device::CPU`] for the host) on `stream`,
/// the buffer's own stream when `None`. The migration is queued, like a
/// copy: work later on the stream finds the pages there.
///
/// Memory of any other kind is refused with an error naming its resource
/// and the managed ones to allocate from.
pub fn prefetch(buffer: &DeviceBuffer, target: Device, stream: Option<&Stream>) -> Result<()> {
    let managed = managed_of(buffer, "prefetching")?;
    if buffer.nbytes() == 0 {
        return Ok(());
    }
    managed.prefetch(
        buffer.ptr(),
        buffer.nbytes(),
        target,
        stream.unwrap_or(buffer.stream()),
    )
}

/// Gives the driver `advice` about `buffer`'s managed memory and `target`
/// (a device of its runtime, or [`Device::CPU`]; the read-mostly advice
/// ignores it). Memory of any other kind is refused.
pub fn advise(buffer: &DeviceBuffer, advice: Advice, target: Device) -> Result<()> {
    let managed = managed_of(buffer, "advising")?;
    if buffer.nbytes() == 0 {
        return Ok(());
    }
    managed.advise(buffer.ptr(), buffer.nbytes(), advice, target)
}
