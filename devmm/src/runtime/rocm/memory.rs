//! The HIP memory resources (`devmm::mrs::rocm`).

use std::ffi::c_void;

use crate::ShippedResource;
use crate::runtime::gpu::memory::{DeviceKind, GpuMemory, ManagedKind, PinnedKind};
use crate::runtime::gpu::pool::GpuAsyncMemory;
use crate::runtime::gpu::{PlatformResources, Status};

use super::sys::HipTable;

pub(super) const RESOURCES: PlatformResources = PlatformResources {
    device: ShippedResource::HipRuntime,
    pinned: ShippedResource::HipPinned,
    managed: ShippedResource::HipManaged,
    pool: ShippedResource::HipAsync,
};

/// `hipHostMallocDefault`.
const HOST_MALLOC_DEFAULT: u32 = 0;

/// Device memory from `hipMallocAsync` on the allocation stream where the
/// driver has it (then `stream_ordered()`), else `hipMalloc`; 256-byte
/// aligned.
///
/// ```no_run
/// use devmm::mrs::rocm::HipRuntimeMemoryResource;
/// use devmm::{Device, DeviceType, MemoryResource};
/// let mr = HipRuntimeMemoryResource::new(Device::new(DeviceType::Rocm, 0))?;
/// assert_eq!(mr.guaranteed_alignment(), 256);
/// # Ok::<(), devmm::Error>(())
/// ```
pub type HipRuntimeMemoryResource = GpuMemory<HipTable, DeviceKind>;

/// Stream-ordered device memory from a pool the resource creates
/// (`hipMemPoolCreate`, `hipMallocFromPoolAsync`), named as rmm's: its
/// release threshold, maximum size and peer access are its own pool's, never
/// the device's default pool's, which other libraries share. The pool is
/// destroyed when the resource drops; its figures come from the driver.
///
/// ```no_run
/// use devmm::mrs::rocm::{HipAsyncMemoryResource, PoolOptions};
/// use devmm::{runtime_for, Device, DeviceType, MemoryResource};
/// let gpu = Device::new(DeviceType::Rocm, 0);
/// let options = PoolOptions { release_threshold: Some(1 << 30), ..PoolOptions::default() };
/// let mr = HipAsyncMemoryResource::new(gpu, options)?;
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
pub type HipAsyncMemoryResource = GpuAsyncMemory<HipTable>;

/// Page-locked host memory from `hipHostMalloc`, on a `rocm_host` device:
/// HIP's pools take device locations only, so there is no host pool here.
///
/// ```no_run
/// use devmm::mrs::rocm::HipPinnedMemoryResource;
/// use devmm::{Device, DeviceType};
/// let mr = HipPinnedMemoryResource::new(Device::new(DeviceType::RocmHost, 0))?;
/// # Ok::<(), devmm::Error>(())
/// ```
pub type HipPinnedMemoryResource = GpuMemory<HipTable, PinnedKind>;

/// Managed memory from `hipMallocManaged`, on a `rocm` device (DLPack has
/// no managed device type for ROCm).
///
/// ```no_run
/// use devmm::mrs::rocm::HipManagedMemoryResource;
/// use devmm::{Device, DeviceType};
/// let mr = HipManagedMemoryResource::new(Device::new(DeviceType::Rocm, 0))?;
/// # Ok::<(), devmm::Error>(())
/// ```
pub type HipManagedMemoryResource = GpuMemory<HipTable, ManagedKind>;

/// `hipHostMalloc` with default flags.
pub(super) fn host_malloc(table: &HipTable, nbytes: usize) -> (&'static str, Status, *mut c_void) {
    let mut ptr = std::ptr::null_mut();
    // SAFETY: `ptr` is a valid out-parameter for the call.
    let status = unsafe { (table.hipHostMalloc)(&mut ptr, nbytes, HOST_MALLOC_DEFAULT) };
    ("hipHostMalloc", status, ptr)
}
