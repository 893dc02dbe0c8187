//! Which of devmm's own resources a resource is.

use std::fmt;

/// One of the resources devmm ships, as
/// [`MemoryResource::shipped`](crate::MemoryResource::shipped) reports it.
///
/// A binding that is handed a resource it did not make (a runtime's
/// default) makes its object of the class that wraps this very type, so
/// the class follows the resource rather than a table of its own.
///
/// ```
/// use devmm::{MallocMemoryResource, MemoryResource, ShippedResource};
/// let shipped = MallocMemoryResource::new().shipped();
/// assert_eq!(shipped, Some(ShippedResource::Malloc));
/// assert_eq!(shipped.unwrap().to_string(), "MallocMemoryResource");
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ShippedResource {
    /// [`MallocMemoryResource`](crate::MallocMemoryResource).
    Malloc,
    /// [`HeapMemoryResource`](crate::HeapMemoryResource).
    Heap,
    /// [`CudaRuntimeMemoryResource`](crate::mrs::cuda::CudaRuntimeMemoryResource).
    CudaRuntime,
    /// [`CudaAsyncMemoryResource`](crate::mrs::cuda::CudaAsyncMemoryResource).
    CudaAsync,
    /// [`CudaPinnedMemoryResource`](crate::mrs::cuda::CudaPinnedMemoryResource).
    CudaPinned,
    /// [`CudaManagedMemoryResource`](crate::mrs::cuda::CudaManagedMemoryResource).
    CudaManaged,
    /// [`HipRuntimeMemoryResource`](crate::mrs::rocm::HipRuntimeMemoryResource).
    HipRuntime,
    /// [`HipAsyncMemoryResource`](crate::mrs::rocm::HipAsyncMemoryResource).
    HipAsync,
    /// [`HipPinnedMemoryResource`](crate::mrs::rocm::HipPinnedMemoryResource).
    HipPinned,
    /// [`HipManagedMemoryResource`](crate::mrs::rocm::HipManagedMemoryResource).
    HipManaged,
}

impl ShippedResource {
    /// The type's name, as `Debug` output and resource chains write it.
    pub const fn name(self) -> &'static str {
        match self {
            ShippedResource::Malloc => "MallocMemoryResource",
            ShippedResource::Heap => "HeapMemoryResource",
            ShippedResource::CudaRuntime => "CudaRuntimeMemoryResource",
            ShippedResource::CudaAsync => "CudaAsyncMemoryResource",
            ShippedResource::CudaPinned => "CudaPinnedMemoryResource",
            ShippedResource::CudaManaged => "CudaManagedMemoryResource",
            ShippedResource::HipRuntime => "HipRuntimeMemoryResource",
            ShippedResource::HipAsync => "HipAsyncMemoryResource",
            ShippedResource::HipPinned => "HipPinnedMemoryResource",
            ShippedResource::HipManaged => "HipManagedMemoryResource",
        }
    }
}

impl fmt::Display for ShippedResource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::{
        Checked, HeapMemoryResource, MallocMemoryResource, MemoryResource, ShippedResource,
        WithOrigin, resource_chain,
    };

    /// The host resources say which they are, through the transparent
    /// wrappers a binding puts around them, and their chains agree.
    #[test]
    fn host_resources_say_which_they_are_through_wrappers() {
        let resources: [(Arc<dyn MemoryResource>, ShippedResource); 4] = [
            (
                Arc::new(MallocMemoryResource::new()),
                ShippedResource::Malloc,
            ),
            (Arc::new(HeapMemoryResource::new()), ShippedResource::Heap),
            (
                Arc::new(Checked::new(MallocMemoryResource::new())),
                ShippedResource::Malloc,
            ),
            (
                Arc::new(WithOrigin::new(HeapMemoryResource::new(), Arc::new(()))),
                ShippedResource::Heap,
            ),
        ];
        for (mr, shipped) in resources {
            assert_eq!(mr.shipped(), Some(shipped));
            assert!(resource_chain(&*mr).starts_with(&format!("{shipped}(")));
        }
    }
}
