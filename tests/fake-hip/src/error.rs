//! `hipGetErrorName`, `hipGetErrorString`.

use std::ffi::c_char;

use fake_driver::entry::error;

use crate::hipError_t;
use crate::platform::HIP;

/// `const char* hipGetErrorName(hipError_t error)`
#[no_mangle]
pub extern "C" fn hipGetErrorName(error: hipError_t) -> *const c_char {
    error::error_name(&HIP, "hipGetErrorName", error)
}

/// `const char* hipGetErrorString(hipError_t error)`
#[no_mangle]
pub extern "C" fn hipGetErrorString(error: hipError_t) -> *const c_char {
    error::error_string(&HIP, "hipGetErrorString", error)
}

/// `hipError_t hipGetLastError(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn hipGetLastError() -> hipError_t {
    error::get_last_error(&HIP, "hipGetLastError")
}

/// `hipError_t hipPeekAtLastError(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn hipPeekAtLastError() -> hipError_t {
    error::peek_at_last_error(&HIP, "hipPeekAtLastError")
}
