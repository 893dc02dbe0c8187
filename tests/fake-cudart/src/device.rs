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

/// The driver API's `cuDevicePrimaryCtxGetState`, handed out by the entry point lookups below
/// (the fake has no libcuda; like the real runtime, it finds driver functions for the caller).
///
/// # Safety
/// `flags` and `active` are null or valid for writes.
#[cfg(feature = "runtime")]
unsafe extern "C" fn cu_device_primary_ctx_get_state(
    device: c_int,
    flags: *mut std::ffi::c_uint,
    active: *mut c_int,
) -> c_int {
    // SAFETY: this function's contract is the entry point's.
    unsafe {
        device::primary_ctx_get_state(&CUDA, "cuDevicePrimaryCtxGetState", device, flags, active)
    }
}

/// `cudaDriverEntryPointSymbolNotFound`.
#[cfg(feature = "runtime")]
const SYMBOL_NOT_FOUND: c_int = 2;

/// What the entry point lookups answer for `symbol`.
///
/// # Safety
/// `symbol` is null or NUL-terminated; `out` and `status` are null or valid for writes.
#[cfg(feature = "runtime")]
unsafe fn entry_point(
    symbol: *const std::ffi::c_char,
    out: *mut *mut std::ffi::c_void,
    status: *mut c_int,
) -> cudaError_t {
    if symbol.is_null() || out.is_null() {
        return 1; // cudaErrorInvalidValue
    }
    // SAFETY: NUL-terminated by this function's contract.
    let name = unsafe { std::ffi::CStr::from_ptr(symbol) };
    let found = name == c"cuDevicePrimaryCtxGetState";
    // SAFETY: `out` and (when non-null) `status` are valid for writes.
    unsafe {
        *out = if found {
            cu_device_primary_ctx_get_state as *mut std::ffi::c_void
        } else {
            std::ptr::null_mut()
        };
        if !status.is_null() {
            *status = if found { 0 } else { SYMBOL_NOT_FOUND };
        }
    }
    0
}

/// `cudaError_t cudaGetDriverEntryPointByVersion(const char* symbol, void** funcPtr,
/// unsigned int cudaVersion, unsigned long long flags, cudaDriverEntryPointQueryResult* status)`
///
/// # Safety
/// As for [`entry_point`].
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn cudaGetDriverEntryPointByVersion(
    symbol: *const std::ffi::c_char,
    func: *mut *mut std::ffi::c_void,
    _version: std::ffi::c_uint,
    _flags: u64,
    status: *mut c_int,
) -> cudaError_t {
    // SAFETY: this function's contract.
    unsafe { entry_point(symbol, func, status) }
}
