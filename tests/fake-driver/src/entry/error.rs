//! `*GetErrorName` and `*GetErrorString`: static strings from the platform's error table;
//! `*GetLastError` and `*PeekAtLastError`: the per-thread last error every failing call sets.
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

/// `cudaError_t cudaGetLastError(void)`: the calling thread's last error, cleared.
pub fn get_last_error(platform: &'static Platform, name: &'static str) -> c_int {
    Call::new(platform, name).last_error(true)
}

/// `cudaError_t cudaPeekAtLastError(void)`: the calling thread's last error, kept.
pub fn peek_at_last_error(platform: &'static Platform, name: &'static str) -> c_int {
    Call::new(platform, name).last_error(false)
}
