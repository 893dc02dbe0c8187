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
