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
