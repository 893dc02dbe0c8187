//! `hipRuntimeGetVersion`, `hipDriverGetVersion`.

use std::ffi::c_int;

use fake_driver::entry::version;

use crate::hipError_t;
use crate::platform::HIP;

/// `hipError_t hipRuntimeGetVersion(int* runtimeVersion)`
///
/// # Safety
/// `runtime_version` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipRuntimeGetVersion(runtime_version: *mut c_int) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { version::runtime_version(&HIP, "hipRuntimeGetVersion", runtime_version) }
}

/// `hipError_t hipDriverGetVersion(int* driverVersion)`
///
/// # Safety
/// `driver_version` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipDriverGetVersion(driver_version: *mut c_int) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { version::driver_version(&HIP, "hipDriverGetVersion", driver_version) }
}
