//! `cudaGetErrorName`, `cudaGetErrorString`.

use std::ffi::c_char;

use fake_driver::entry::error;

use crate::cudaError_t;
use crate::platform::CUDA;

/// `const char* cudaGetErrorName(cudaError_t error)`
#[no_mangle]
pub extern "C" fn cudaGetErrorName(error: cudaError_t) -> *const c_char {
    error::error_name(&CUDA, "cudaGetErrorName", error)
}

/// `const char* cudaGetErrorString(cudaError_t error)`
#[no_mangle]
pub extern "C" fn cudaGetErrorString(error: cudaError_t) -> *const c_char {
    error::error_string(&CUDA, "cudaGetErrorString", error)
}

/// `cudaError_t cudaGetLastError(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn cudaGetLastError() -> cudaError_t {
    error::get_last_error(&CUDA, "cudaGetLastError")
}

/// `cudaError_t cudaPeekAtLastError(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn cudaPeekAtLastError() -> cudaError_t {
    error::peek_at_last_error(&CUDA, "cudaPeekAtLastError")
}
