//! `cudaPeekAtLastError`, which reads the last error without clearing it.

use fake_driver::entry::error;

use crate::cudaError_t;
use crate::platform::CUDA;

/// `cudaError_t cudaPeekAtLastError(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn cudaPeekAtLastError() -> cudaError_t {
    error::peek_at_last_error(&CUDA, "cudaPeekAtLastError")
}
