//! ROCm's device types and the status codes devmm treats specially.

use std::ffi::c_int;

use crate::device::DeviceType;
use crate::runtime::gpu::Status;

/// Device memory first (managed memory is also `rocm`), then pinned host
/// memory, all served by HIP with the device's ordinal.
pub(super) const DEVICE_TYPES: &[DeviceType] = &[DeviceType::Rocm, DeviceType::RocmHost];

/// `hipErrorOutOfMemory` (also `hipErrorMemoryAllocation`).
pub(super) const ERROR_OUT_OF_MEMORY: Status = 2;

/// `hipErrorNoDevice`: `hipGetDeviceCount` on a machine without a GPU.
pub(super) const ERROR_NO_DEVICE: Status = 100;

/// `hipErrorInsufficientDriver`: the library loaded but there is no usable
/// driver behind it.
pub(super) const ERROR_INSUFFICIENT_DRIVER: Status = 35;

/// `hipErrorNotInitialized`: the driver could not be initialised.
pub(super) const ERROR_NOT_INITIALIZED: Status = 3;

/// `hipDeviceAttributeMemoryPoolsSupported`.
pub(super) const ATTR_MEMORY_POOLS_SUPPORTED: c_int = 88;

/// `hipDeviceAttributeUnifiedAddressing`: one address space for host and
/// device, which `hipMemcpyDefault` needs.
pub(super) const ATTR_UNIFIED_ADDRESSING: c_int = 85;

/// AMD GPUs name their architecture (`gfx942`) instead of a compute
/// capability; devmm reports none.
pub(super) const ATTR_COMPUTE_CAPABILITY: Option<(c_int, c_int)> = None;
