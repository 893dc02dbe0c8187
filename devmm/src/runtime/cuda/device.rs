//! CUDA's device types and the status codes devmm treats specially.

use crate::device::DeviceType;
use crate::runtime::gpu::Status;

/// Device memory first, then pinned host and managed memory, all served by
/// the CUDA runtime with the device's ordinal.
pub(super) const DEVICE_TYPES: &[DeviceType] = &[
    DeviceType::Cuda,
    DeviceType::CudaHost,
    DeviceType::CudaManaged,
];

/// `cudaErrorMemoryAllocation`.
pub(super) const ERROR_MEMORY_ALLOCATION: Status = 2;

/// `cudaErrorNoDevice`: `cudaGetDeviceCount` on a machine without a GPU.
pub(super) const ERROR_NO_DEVICE: Status = 100;
