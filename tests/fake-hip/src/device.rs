//! `hipDevicePrimaryCtxGetState`, which the description gives no role (CUDA reaches the driver's
//! through an entry point lookup instead).

use std::ffi::c_int;

use fake_driver::entry::device;

use crate::hipError_t;
use crate::platform::HIP;

/// `hipError_t hipDevicePrimaryCtxGetState(hipDevice_t dev, unsigned int* flags, int* active)`
///
/// # Safety
/// `flags` and `active` are null or valid for writes.
#[cfg(feature = "runtime")]
#[no_mangle]
pub unsafe extern "C" fn hipDevicePrimaryCtxGetState(
    device: c_int,
    flags: *mut std::ffi::c_uint,
    active: *mut c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe {
        device::primary_ctx_get_state(&HIP, "hipDevicePrimaryCtxGetState", device, flags, active)
    }
}
