//! Host-accessible devmm resources as `allocator_api2::alloc::Allocator`s
//! (cargo feature `allocator-api2`), so `allocator_api2::vec::Vec<T, _>`,
//! `Box` and hashbrown's tables allocate through a devmm stack and show in
//! its statistics.
//!
//! ```
//! use std::sync::Arc;
//! use allocator_api2::vec::Vec;
//! use devmm::interop::HostAllocator;
//! use devmm::{MallocMemoryResource, StatisticsAdaptor};
//!
//! let stats = Arc::new(StatisticsAdaptor::new(MallocMemoryResource::new()));
//! let mut v: Vec<u64, _> = Vec::new_in(HostAllocator::new(stats.clone())?);
//! v.extend(0..100);
//! assert!(stats.current_bytes() >= 800);
//! drop(v);
//! assert_eq!(stats.current_bytes(), 0);
//! # Ok::<(), devmm::Error>(())
//! ```

use std::alloc::Layout;
use std::fmt;
use std::ptr::NonNull;
use std::sync::Arc;

use allocator_api2::alloc::{AllocError, Allocator};

use crate::device::DeviceType;
use crate::error::{Error, Result};
use crate::ptr::DevicePtr;
use crate::resource::MemoryResource;
use crate::stream::Stream;

/// A host-accessible resource (cpu, pinned or managed memory) seen as an
/// `Allocator`. Requests whose alignment exceeds the resource's
/// [`guaranteed_alignment`](MemoryResource::guaranteed_alignment) fail
/// with `AllocError` (devmm never over-allocates behind a caller's back);
/// zero-sized requests never reach the resource. Clones share the resource.
#[derive(Clone)]
pub struct HostAllocator {
    resource: Arc<dyn MemoryResource>,
    stream: Stream,
}

impl HostAllocator {
    /// Wraps `resource`, allocating on its device's default stream;
    /// refused for memory the host cannot touch, and with
    /// [`Error::NotDereferenceable`] for a resource that does not declare
    /// its pointers host-dereferenceable.
    pub fn new(resource: Arc<dyn MemoryResource>) -> Result<HostAllocator> {
        let device = resource.device();
        let ty = device.ty();
        if !(ty.is_host_accessible() || ty == DeviceType::CudaManaged) {
            return Err(Error::InvalidArgument {
                reason: format!(
                    "{} allocates on {device}, which the host cannot read or write; an Allocator \
                     needs host-accessible memory (cpu, pinned or managed)",
                    crate::resource::resource_chain(&*resource)
                ),
            });
        }
        crate::resource::check_dereferenceable(&*resource, "a host Allocator")?;
        let stream = if device == crate::Device::CPU {
            Stream::cpu()
        } else {
            crate::runtime::runtime_for(device)?.default_stream(device)?
        };
        Ok(HostAllocator { resource, stream })
    }

    /// The resource behind the allocator.
    pub fn resource(&self) -> &Arc<dyn MemoryResource> {
        &self.resource
    }
}

impl fmt::Debug for HostAllocator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HostAllocator")
            .field("resource", &self.resource)
            .finish()
    }
}

/// A non-null, `align`-aligned address for zero-sized blocks.
fn dangling(align: usize) -> NonNull<[u8]> {
    // `align` is a non-zero power of two (a `Layout` invariant).
    let ptr =
        NonNull::new(std::ptr::without_provenance_mut::<u8>(align)).unwrap_or(NonNull::dangling());
    NonNull::slice_from_raw_parts(ptr, 0)
}

// SAFETY: blocks come from the resource, which hands out distinct live
// blocks of at least the size asked, aligned to its guarantee (requests
// above it are refused); they stay valid until `deallocate`, and clones
// share the same resource, so any clone may free them.
unsafe impl Allocator for HostAllocator {
    fn allocate(&self, layout: Layout) -> Result<NonNull<[u8]>, AllocError> {
        if layout.size() == 0 {
            return Ok(dangling(layout.align()));
        }
        if layout.align() > self.resource.guaranteed_alignment() {
            return Err(AllocError);
        }
        let ptr = crate::observe_allocation(|| self.resource.allocate(layout.size(), &self.stream))
            .map_err(|_| AllocError)?;
        let ptr = NonNull::new(ptr.as_host_ptr::<u8>()).ok_or(AllocError)?;
        Ok(NonNull::slice_from_raw_parts(ptr, layout.size()))
    }

    unsafe fn deallocate(&self, ptr: NonNull<u8>, layout: Layout) {
        if layout.size() == 0 {
            return;
        }
        let ptr = DevicePtr::from_addr(ptr.as_ptr() as usize);
        // SAFETY: the caller returns a block this allocator (or a clone,
        // sharing the resource) allocated with `layout`, once.
        if let Err(error) = unsafe { self.resource.deallocate(ptr, layout.size(), &self.stream) } {
            tracing::error!(target: "devmm::alloc", %error, "deallocation through HostAllocator failed");
        }
    }
}
