//! `hipDevicePrimaryCtxGetState`, which the library exports and devmm's description leaves out:
//! it reports a device active only once it ran something, not once it was made current, so devmm
//! does not ask it (`Platform::set_device_activates`).

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
