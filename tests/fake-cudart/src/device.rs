//! The driver entry point lookup (`cudaGetDriverEntryPointByVersion`), which hands out the
//! fake's `cuDevicePrimaryCtxGetState`.

use std::ffi::c_int;

use fake_driver::entry::device;

use crate::cudaError_t;
use crate::platform::CUDA;

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
/// `symbol` is null or NUL-terminated; `funcPtr` and `status` are null or valid for writes.
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
