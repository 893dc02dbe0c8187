//! `hipPeekAtLastError`, which reads the last error without clearing it.

use fake_driver::entry::error;

use crate::hipError_t;
use crate::platform::HIP;

/// `hipError_t hipPeekAtLastError(void)`
#[cfg(feature = "runtime")]
#[no_mangle]
pub extern "C" fn hipPeekAtLastError() -> hipError_t {
    error::peek_at_last_error(&HIP, "hipPeekAtLastError")
}
