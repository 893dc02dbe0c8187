//! CUDA's device types and the status codes devmm treats specially.

use std::ffi::c_int;

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

/// `cudaErrorInsufficientDriver` and `cudaErrorInitializationError`: the
/// library loaded but there is no usable driver behind it (a container
/// without the NVIDIA driver, or one older than the runtime).
pub(super) const ERRORS_NO_DRIVER: &[Status] = &[35, 3];

/// `cudaDevAttrMemoryPoolsSupported`.
pub(super) const ATTR_MEMORY_POOLS_SUPPORTED: c_int = 115;

/// `cudaDevAttrComputeCapabilityMajor` and `cudaDevAttrComputeCapabilityMinor`.
pub(super) const ATTR_COMPUTE_CAPABILITY: Option<(c_int, c_int)> = Some((75, 76));
