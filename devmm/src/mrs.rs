//! Concrete memory resources, grouped by platform (the seed's `devmm.mrs`).

/// Host memory: libc's allocator and the checked heap resource.
pub mod cpu {
    pub use crate::runtime::cpu::memory::{
        CPU_DEFAULT_ALIGNMENT, HeapMemoryResource, MallocMemoryResource, require_host_device,
    };
}

/// CUDA memory: device (`cudaMalloc` / `cudaMallocAsync`), pinned host and
/// managed memory, through the CUDA runtime loaded at run time.
pub mod cuda {
    pub use crate::runtime::GPU_ALIGNMENT;
    pub use crate::runtime::cuda::{
        CudaManagedMemoryResource, CudaPinnedMemoryResource, CudaRuntimeMemoryResource,
    };
}

/// ROCm memory: device (`hipMalloc` / `hipMallocAsync`), pinned host and
/// managed memory, through HIP loaded at run time.
pub mod rocm {
    pub use crate::runtime::GPU_ALIGNMENT;
    pub use crate::runtime::rocm::{
        HipManagedMemoryResource, HipPinnedMemoryResource, HipRuntimeMemoryResource,
    };
}
