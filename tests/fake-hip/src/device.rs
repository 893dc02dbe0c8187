//! `hipGetDeviceCount`, `hipGetDevice`, `hipSetDevice`, `hipMemGetInfo`.

use std::ffi::c_int;

use fake_driver::entry::device;

use crate::hipError_t;
use crate::platform::HIP;

/// `hipError_t hipGetDeviceCount(int* count)`
///
/// # Safety
/// `count` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceCount(count: *mut c_int) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device_count(&HIP, "hipGetDeviceCount", count) }
}

/// `hipError_t hipGetDevice(int* device)`
///
/// # Safety
/// `device` is null or valid for a write.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipGetDevice(device: *mut c_int) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device(&HIP, "hipGetDevice", device) }
}

/// `hipError_t hipSetDevice(int device)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn hipSetDevice(device: c_int) -> hipError_t {
    device::set_device(&HIP, "hipSetDevice", device)
}

/// `hipError_t hipMemGetInfo(size_t* free, size_t* total)`
///
/// # Safety
/// `free` and `total` are each null or valid for a write.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipMemGetInfo(free: *mut usize, total: *mut usize) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::mem_get_info(&HIP, "hipMemGetInfo", free, total) }
}
