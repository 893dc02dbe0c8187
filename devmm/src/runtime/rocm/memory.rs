//! The HIP memory resources (`devmm::mrs::rocm`).

use std::ffi::c_void;

use crate::runtime::gpu::memory::{DeviceKind, GpuMemory, ManagedKind, PinnedKind};
use crate::runtime::gpu::{ResourceNames, Status};

use super::sys::HipTable;

pub(super) const RESOURCE_NAMES: ResourceNames = ResourceNames {
    device: "HipRuntimeMemoryResource",
    pinned: "HipPinnedMemoryResource",
    managed: "HipManagedMemoryResource",
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

/// Page-locked host memory from `hipHostMalloc`, on a `rocm_host` device.
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
