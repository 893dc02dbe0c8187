//! ROCm's device types and the status codes devmm treats specially.

use crate::device::DeviceType;
use crate::runtime::gpu::Status;

/// Device memory first (managed memory is also `rocm`), then pinned host
/// memory, all served by HIP with the device's ordinal.
pub(super) const DEVICE_TYPES: &[DeviceType] = &[DeviceType::Rocm, DeviceType::RocmHost];

/// `hipErrorOutOfMemory` (also `hipErrorMemoryAllocation`).
pub(super) const ERROR_OUT_OF_MEMORY: Status = 2;

/// `hipErrorNoDevice`: `hipGetDeviceCount` on a machine without a GPU.
pub(super) const ERROR_NO_DEVICE: Status = 100;
