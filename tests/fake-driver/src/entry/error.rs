//! `*GetErrorName` and `*GetErrorString`: static strings from the platform's error table.
//!
//! ```
//! use fake_driver::{entry::error, Platform};
//! let name = error::error_name(&Platform::EXAMPLE, "cudaGetErrorName", 0);
//! // SAFETY: the returned pointer is a static NUL-terminated string.
//! assert_eq!(unsafe { std::ffi::CStr::from_ptr(name) }.to_str(), Ok("cudaSuccess"));
//! ```

use std::ffi::{c_char, c_int};

use crate::call::Call;
use crate::platform::Platform;

/// `const char* cudaGetErrorName(cudaError_t error)`; never null.
pub fn error_name(platform: &'static Platform, name: &'static str, error: c_int) -> *const c_char {
    Call::new(platform, name).arg("error", error).record();
    platform.error_info(error).name.as_ptr()
}

/// `const char* cudaGetErrorString(cudaError_t error)`; never null.
pub fn error_string(
    platform: &'static Platform,
    name: &'static str,
    error: c_int,
) -> *const c_char {
    Call::new(platform, name).arg("error", error).record();
    platform.error_info(error).description.as_ptr()
}
