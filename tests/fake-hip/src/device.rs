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

/// `hipError_t hipDeviceGetAttribute(int* value, attr, int device)`
///
/// # Safety
/// `value` is null or valid for a write.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetAttribute(
    value: *mut c_int,
    attr: c_int,
    device: c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::device_get_attribute(&HIP, "hipDeviceGetAttribute", value, attr, device) }
}

/// `hipError_t hipDeviceGetPCIBusId(char* pciBusId, int len, int device)`
///
/// # Safety
/// `bus_id` is null or valid for `len` bytes of writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetPCIBusId(
    bus_id: *mut std::ffi::c_char,
    len: c_int,
    device: c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::device_get_pci_bus_id(&HIP, "hipDeviceGetPCIBusId", bus_id, len, device) }
}

/// `hipError_t hipGetDevicePropertiesR0600(prop*, int device)`: fills the name only.
///
/// # Safety
/// `prop` is null or valid for 256 bytes of writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipGetDevicePropertiesR0600(
    prop: *mut std::ffi::c_void,
    device: c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device_properties(&HIP, "hipGetDevicePropertiesR0600", prop, device) }
}

/// `hipError_t hipGetDeviceProperties(prop*, int device)`: fills the name only.
///
/// # Safety
/// `prop` is null or valid for 256 bytes of writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipGetDeviceProperties(
    prop: *mut std::ffi::c_void,
    device: c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::get_device_properties(&HIP, "hipGetDeviceProperties", prop, device) }
}

/// `hipError_t hipDeviceGetDefaultMemPool(memPool*, int device)`
///
/// # Safety
/// `pool` is null or valid for a write.
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetDefaultMemPool(
    pool: *mut *mut std::ffi::c_void,
    device: c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::device_get_default_mem_pool(&HIP, "hipDeviceGetDefaultMemPool", pool, device) }
}

/// `hipError_t hipMemPoolSetAttribute(memPool, attr, void* value)`
///
/// # Safety
/// `value` is null or valid for reading a `uint64_t`.
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolSetAttribute(
    pool: *mut std::ffi::c_void,
    attr: c_int,
    value: *mut std::ffi::c_void,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { device::mem_pool_set_attribute(&HIP, "hipMemPoolSetAttribute", pool, attr, value) }
}

/// `hipError_t hipDeviceSynchronize(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn hipDeviceSynchronize() -> hipError_t {
    device::device_synchronize(&HIP, "hipDeviceSynchronize")
}

/// `hipError_t hipDevicePrimaryCtxGetState(hipDevice_t dev, unsigned int* flags, int* active)`
///
/// # Safety
/// `flags` and `active` are null or valid for writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipDevicePrimaryCtxGetState(
    device: c_int,
    flags: *mut std::ffi::c_uint,
    active: *mut c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe {
        device::primary_ctx_get_state(&HIP, "hipDevicePrimaryCtxGetState", device, flags, active)
    }
}
