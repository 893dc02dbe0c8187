//! Concrete memory resources, grouped by platform (the seed's `devmm.mrs`).

/// Host memory: libc's allocator and the checked heap resource.
pub mod cpu {
    pub use crate::runtime::cpu::memory::{
        CPU_DEFAULT_ALIGNMENT, HeapMemoryResource, MallocMemoryResource, require_host_device,
    };
}

/// CUDA memory: device (`cudaMalloc` / `cudaMallocAsync`), device memory
/// from a pool of its own, pinned host and managed memory, through the CUDA
/// runtime loaded at run time.
pub mod cuda {
    pub use crate::pool_statistics::PoolStatistics;
    pub use crate::runtime::cuda::{
        CudaAsyncMemoryResource, CudaManagedMemoryResource, CudaPinnedMemoryResource,
        CudaRuntimeMemoryResource,
    };
    pub use crate::runtime::{GPU_ALIGNMENT, PoolOptions};
}

/// ROCm memory: device (`hipMalloc` / `hipMallocAsync`), device memory
/// from a pool of its own, pinned host and managed memory, through HIP loaded
/// at run time.
pub mod rocm {
    pub use crate::pool_statistics::PoolStatistics;
    pub use crate::runtime::rocm::{
        HipAsyncMemoryResource, HipManagedMemoryResource, HipPinnedMemoryResource,
        HipRuntimeMemoryResource,
    };
    pub use crate::runtime::{GPU_ALIGNMENT, PoolOptions};
}
