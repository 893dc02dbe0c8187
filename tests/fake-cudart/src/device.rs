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

/// `cudaError_t cudaDeviceGetAttribute(int* value, attr, int device)`
///
/// # Safety
/// `value` is null or valid for a write.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetAttribute(
    value: *mut c_int,
    attr: c_int,
    device: c_int,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::device_get_attribute(&CUDA, "cudaDeviceGetAttribute", value, attr, device) }
}

/// `cudaError_t cudaDeviceGetPCIBusId(char* pciBusId, int len, int device)`
///
/// # Safety
/// `bus_id` is null or valid for `len` bytes of writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetPCIBusId(
    bus_id: *mut std::ffi::c_char,
    len: c_int,
    device: c_int,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::device_get_pci_bus_id(&CUDA, "cudaDeviceGetPCIBusId", bus_id, len, device) }
}

/// `cudaError_t cudaGetDeviceProperties_v2(prop*, int device)`: fills the name only.
///
/// # Safety
/// `prop` is null or valid for 256 bytes of writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceProperties_v2(
    prop: *mut std::ffi::c_void,
    device: c_int,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device_properties(&CUDA, "cudaGetDeviceProperties_v2", prop, device) }
}

/// `cudaError_t cudaGetDeviceProperties(prop*, int device)`: fills the name only.
///
/// # Safety
/// `prop` is null or valid for 256 bytes of writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaGetDeviceProperties(
    prop: *mut std::ffi::c_void,
    device: c_int,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device_properties(&CUDA, "cudaGetDeviceProperties", prop, device) }
}

/// `cudaError_t cudaDeviceGetDefaultMemPool(memPool*, int device)`
///
/// # Safety
/// `pool` is null or valid for a write.
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub unsafe extern "C" fn cudaDeviceGetDefaultMemPool(
    pool: *mut *mut std::ffi::c_void,
    device: c_int,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe {
        device::device_get_default_mem_pool(&CUDA, "cudaDeviceGetDefaultMemPool", pool, device)
    }
}

/// `cudaError_t cudaMemPoolSetAttribute(memPool, attr, void* value)`
///
/// # Safety
/// `value` is null or valid for reading a `uint64_t`.
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub unsafe extern "C" fn cudaMemPoolSetAttribute(
    pool: *mut std::ffi::c_void,
    attr: c_int,
    value: *mut std::ffi::c_void,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::mem_pool_set_attribute(&CUDA, "cudaMemPoolSetAttribute", pool, attr, value) }
}

/// `cudaError_t cudaDeviceSynchronize(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn cudaDeviceSynchronize() -> cudaError_t {
    device::device_synchronize(&CUDA, "cudaDeviceSynchronize")
}
