//! [`WithOrigin`]: a resource that remembers the object it stands for, so
//! a binding recovers its own object from any resource the core hands
//! back (the registry's current resource, a buffer's resource) instead of
//! keeping a map of its own.

use std::any::Any;
use std::fmt;
use std::sync::Arc;

use crate::error::Result;
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

/// `inner`, unchanged in every call and probe (its `Debug` and its place
/// in a [`resource_chain`](crate::resource_chain) included), answering
/// [`MemoryResource::origin`] with `origin`.
///
/// ```
/// use std::sync::Arc;
/// use devmm::{get_current_memory_resource, using_memory_resource, Device, MallocMemoryResource, MemoryResource, WithOrigin};
/// let tagged = WithOrigin::new(MallocMemoryResource::new(), Arc::new("my resource"));
/// let _guard = using_memory_resource(Arc::new(tagged));
/// let current = get_current_memory_resource(Device::CPU)?;
/// let origin = current.origin().and_then(|o| o.downcast_ref::<&str>());
/// assert_eq!(origin, Some(&"my resource"));
/// assert_eq!(format!("{current:?}"), "MallocMemoryResource(device=cpu:0, alignment=64)");
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct WithOrigin<R = Arc<dyn MemoryResource>> {
    inner: R,
    origin: Arc<dyn Any + Send + Sync>,
}

impl<R: MemoryResource> WithOrigin<R> {
    /// `inner`, standing for `origin`.
    pub fn new(inner: R, origin: Arc<dyn Any + Send + Sync>) -> Self {
        WithOrigin { inner, origin }
    }

    /// The resource that does the work.
    pub fn inner(&self) -> &R {
        &self.inner
    }
}

impl<R: fmt::Debug> fmt::Debug for WithOrigin<R> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<R: MemoryResource> MemoryResource for WithOrigin<R> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        self.inner.allocate(nbytes, stream)
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: the caller upholds the contract, and `inner` allocated `ptr`.
        unsafe { self.inner.deallocate(ptr, nbytes, stream) }
    }

    crate::resource::forward_transparent_probes!(inner);

    fn detects_misuse(&self) -> bool {
        self.inner.detects_misuse()
    }

    fn live_count(&self) -> Option<usize> {
        self.inner.live_count()
    }

    fn origin(&self) -> Option<&(dyn Any + Send + Sync)> {
        Some(&*self.origin)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MallocMemoryResource, StatisticsAdaptor, resource_chain};

    #[test]
    fn forwards_every_call_and_keeps_the_chain() {
        let tagged = Arc::new(WithOrigin::new(
            Arc::new(crate::Checked::new(MallocMemoryResource::new())) as Arc<dyn MemoryResource>,
            Arc::new(7_u32),
        ));
        let s = Stream::cpu();
        let p = tagged.allocate(10, &s).unwrap();
        assert_eq!(tagged.live_count(), Some(1));
        assert!(tagged.detects_misuse() && tagged.dereferenceable());
        // SAFETY: `p` came from `tagged.allocate(10, ..)`.
        unsafe { tagged.deallocate(p, 10, &s) }.unwrap();
        assert_eq!(tagged.live_count(), Some(0));
        let stats = StatisticsAdaptor::new(Arc::clone(&tagged));
        assert_eq!(
            resource_chain(&stats),
            "StatisticsAdaptor -> MallocMemoryResource(device=cpu:0, alignment=64)"
        );
        // The adaptor is a resource of its own: it does not claim the origin.
        assert!(stats.origin().is_none());
        let origin = tagged.origin().and_then(|o| o.downcast_ref::<u32>());
        assert_eq!(origin, Some(&7));
    }
}
