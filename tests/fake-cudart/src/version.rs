//! `cudaRuntimeGetVersion`, `cudaDriverGetVersion`.

use std::ffi::c_int;

use fake_driver::entry::version;

use crate::cudaError_t;
use crate::platform::CUDA;

/// `cudaError_t cudaRuntimeGetVersion(int* runtimeVersion)`
///
/// # Safety
/// `runtime_version` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaRuntimeGetVersion(runtime_version: *mut c_int) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { version::runtime_version(&CUDA, "cudaRuntimeGetVersion", runtime_version) }
}

/// `cudaError_t cudaDriverGetVersion(int* driverVersion)`
///
/// # Safety
/// `driver_version` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaDriverGetVersion(driver_version: *mut c_int) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { version::driver_version(&CUDA, "cudaDriverGetVersion", driver_version) }
}
