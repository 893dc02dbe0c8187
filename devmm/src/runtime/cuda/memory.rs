//! The CUDA memory resources (`devmm::mrs::cuda`).

use std::ffi::c_void;

use crate::ShippedResource;
use crate::runtime::gpu::memory::{DeviceKind, GpuMemory, ManagedKind, PinnedKind};
use crate::runtime::gpu::pool::GpuAsyncMemory;
use crate::runtime::gpu::{PlatformResources, Status};

use super::sys::CudaRuntimeTable;

pub(super) const RESOURCES: PlatformResources = PlatformResources {
    device: ShippedResource::CudaRuntime,
    pinned: ShippedResource::CudaPinned,
    managed: ShippedResource::CudaManaged,
    pool: ShippedResource::CudaAsync,
};

/// Device memory from `cudaMallocAsync` on the allocation stream where the
/// driver has it (then `stream_ordered()`), else `cudaMalloc`; 256-byte
/// aligned. Out of memory is [`Error::OutOfMemory`](crate::Error::OutOfMemory)
/// naming the device, the size and the resource chain.
///
/// ```no_run
/// use devmm::mrs::cuda::CudaRuntimeMemoryResource;
/// use devmm::{runtime_for, Device, DeviceType, MemoryResource};
/// let gpu = Device::new(DeviceType::Cuda, 0);
/// let mr = CudaRuntimeMemoryResource::new(gpu)?;
/// let stream = runtime_for(gpu)?.default_stream(gpu)?;
/// let p = mr.allocate(1 << 20, &stream)?;
/// // SAFETY: `p` came from `mr.allocate(1 << 20, ..)` and is freed once.
/// unsafe { mr.deallocate(p, 1 << 20, &stream)? };
/// # Ok::<(), devmm::Error>(())
/// ```
pub type CudaRuntimeMemoryResource = GpuMemory<CudaRuntimeTable, DeviceKind>;

/// Stream-ordered device memory from a pool the resource creates
/// (`cudaMemPoolCreate`, `cudaMallocFromPoolAsync`), named as rmm's: its
/// release threshold, maximum size and peer access are its own pool's, never
/// the device's default pool's, which other libraries share. The pool is
/// destroyed when the resource drops; its figures come from the driver.
///
/// ```no_run
/// use devmm::mrs::cuda::{CudaAsyncMemoryResource, PoolOptions};
/// use devmm::{runtime_for, Device, DeviceType, MemoryResource};
/// let gpu = Device::new(DeviceType::Cuda, 0);
/// let options = PoolOptions { release_threshold: Some(1 << 30), ..PoolOptions::default() };
/// let mr = CudaAsyncMemoryResource::new(gpu, options)?;
/// let stream = runtime_for(gpu)?.default_stream(gpu)?;
/// let p = mr.allocate(64 << 20, &stream)?;
/// // SAFETY: `p` came from `mr.allocate(64 << 20, ..)` and is freed once.
/// unsafe { mr.deallocate(p, 64 << 20, &stream)? };
/// stream.synchronize()?;
/// let figures = mr.pool_statistics()?;
/// assert!(figures.reserved_bytes >= 64 << 20 && figures.used_bytes == 0);
/// mr.trim(0)?; // hand the unused memory back to the device
/// # Ok::<(), devmm::Error>(())
/// ```
pub type CudaAsyncMemoryResource = GpuAsyncMemory<CudaRuntimeTable>;

/// Page-locked host memory on a `cuda_host` device: stream-ordered from a
/// pool of pinned host memory the resource makes where the runtime has such
/// pools (CUDA 12.2 on: `cudaMemPoolCreate` with a host location), else from
/// `cudaMallocHost`; `uses_host_pool()` says which. The pool keeps freed
/// blocks pinned for the next allocation (pinning is slow) until `trim`
/// unpins them or the resource is dropped; `pool_statistics()` gives its
/// figures.
///
/// ```no_run
/// use devmm::mrs::cuda::CudaPinnedMemoryResource;
/// use devmm::{Device, DeviceType, MemoryResource};
/// let mr = CudaPinnedMemoryResource::new(Device::new(DeviceType::CudaHost, 0))?;
/// assert_eq!(mr.guaranteed_alignment(), 256);
/// # Ok::<(), devmm::Error>(())
/// ```
pub type CudaPinnedMemoryResource = GpuMemory<CudaRuntimeTable, PinnedKind>;

/// Managed (unified) memory from `cudaMallocManaged`, on a `cuda_managed`
/// device.
///
/// ```no_run
/// use devmm::mrs::cuda::CudaManagedMemoryResource;
/// use devmm::{Device, DeviceType};
/// let mr = CudaManagedMemoryResource::new(Device::new(DeviceType::CudaManaged, 0))?;
/// # Ok::<(), devmm::Error>(())
/// ```
pub type CudaManagedMemoryResource = GpuMemory<CudaRuntimeTable, ManagedKind>;

/// `cudaMallocHost`, whose signature has no flags (HIP's has).
pub(super) fn host_malloc(
    table: &CudaRuntimeTable,
    nbytes: usize,
) -> (&'static str, Status, *mut c_void) {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-parameter for the call.
    let status = unsafe { (table.cudaMallocHost)(&mut ptr, nbytes) };
    ("cudaMallocHost", status, ptr)
}
