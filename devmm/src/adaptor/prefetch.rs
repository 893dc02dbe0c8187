use crate::error::Result;
use crate::managed::not_managed;
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;

/// Prefetches every allocation of a managed upstream to the upstream's
/// device on the allocation's stream, so the first kernel to touch new
/// memory finds its pages there (rmm's `prefetch_resource_adaptor`).
///
/// An upstream whose memory is not managed is refused when the adaptor is
/// made, with an error naming it:
///
/// ```
/// use devmm::{Error, MallocMemoryResource, PrefetchAdaptor};
/// let refused = PrefetchAdaptor::new(MallocMemoryResource::new()).unwrap_err();
/// assert!(matches!(refused, Error::Refused { .. }));
/// assert!(refused.to_string().contains("MallocMemoryResource"), "{refused}");
/// ```
#[derive(Debug)]
pub struct PrefetchAdaptor<U> {
    upstream: super::upstream::Upstream<U>,
    probes: super::UpstreamProbes,
}

impl<U: MemoryResource> PrefetchAdaptor<U> {
    /// Wraps `upstream`, whose memory must be managed
    /// ([`MemoryResource::managed_memory`]).
    pub fn new(upstream: U) -> Result<Self> {
        if upstream.managed_memory().is_none() {
            return Err(not_managed("PrefetchAdaptor", "its upstream", &upstream));
        }
        Ok(PrefetchAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            probes: super::UpstreamProbes::new(),
        })
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }
}

impl<U: MemoryResource> MemoryResource for PrefetchAdaptor<U> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let ptr = self
            .upstream
            .allocate(nbytes, stream)
            .map_err(|e| e.through("PrefetchAdaptor"))?;
        let Some(managed) = self.upstream.managed_memory() else {
            // `new` checked it; a resource does not change its kind.
            return Ok(ptr);
        };
        if nbytes == 0 {
            return Ok(ptr);
        }
        match managed.prefetch(ptr, nbytes, self.upstream.device(), stream) {
            Ok(()) => Ok(ptr),
            Err(e) => {
                // SAFETY: `ptr` was just allocated by upstream with `nbytes`
                // on `stream`, and nobody else has it.
                if let Err(free) = unsafe { self.upstream.deallocate(ptr, nbytes, stream) } {
                    tracing::warn!(target: "devmm::adaptor", error = %free, "could not free an allocation whose prefetch failed");
                }
                Err(e)
            }
        }
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        unsafe { self.upstream.deallocate(ptr, nbytes, stream) }
    }

    forward_probes!(upstream: U, probes);

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }
}
