//! `cudaGetDeviceCount`, `cudaGetDevice`, `cudaSetDevice`, `cudaMemGetInfo`.

use std::ffi::c_int;

use fake_driver::entry::device;

use crate::cudaError_t;
use crate::platform::CUDA;

/// `cudaError_t cudaGetDeviceCount(int* count)`
///
/// # Safety
/// `count` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceCount(count: *mut c_int) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device_count(&CUDA, "cudaGetDeviceCount", count) }
}

/// `cudaError_t cudaGetDevice(int* device)`
///
/// # Safety
/// `device` is null or valid for a write.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaGetDevice(device: *mut c_int) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device(&CUDA, "cudaGetDevice", device) }
}

/// `cudaError_t cudaSetDevice(int device)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn cudaSetDevice(device: c_int) -> cudaError_t {
    device::set_device(&CUDA, "cudaSetDevice", device)
}

/// `cudaError_t cudaMemGetInfo(size_t* free, size_t* total)`
///
/// # Safety
/// `free` and `total` are each null or valid for a write.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaMemGetInfo(free: *mut usize, total: *mut usize) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::mem_get_info(&CUDA, "cudaMemGetInfo", free, total) }
}
