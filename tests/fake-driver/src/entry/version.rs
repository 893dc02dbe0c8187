//! `*RuntimeGetVersion` and `*DriverGetVersion`: the platform's defaults until
//! `fake_set_version` changes them.
//!
//! ```
//! use fake_driver::{entry::version, Platform};
//! let mut v = 0;
//! // SAFETY: `v` is valid for a write.
//! assert_eq!(unsafe { version::runtime_version(&Platform::EXAMPLE, "cudaRuntimeGetVersion", &mut v) }, 0);
//! assert_eq!(v, Platform::EXAMPLE.default_versions.0);
//! ```

use std::ffi::c_int;

use crate::call::Call;
use crate::out::Out;
use crate::platform::Platform;

/// `cudaRuntimeGetVersion(int* runtimeVersion)`.
///
/// # Safety
/// `version` is null or valid for a write.
pub unsafe fn runtime_version(
    platform: &'static Platform,
    name: &'static str,
    version: *mut c_int,
) -> c_int {
    // SAFETY: this function's contract.
    unsafe { report(platform, name, version, |(runtime, _)| runtime) }
}

/// `cudaDriverGetVersion(int* driverVersion)`.
///
/// # Safety
/// `version` is null or valid for a write.
pub unsafe fn driver_version(
    platform: &'static Platform,
    name: &'static str,
    version: *mut c_int,
) -> c_int {
    // SAFETY: this function's contract.
    unsafe { report(platform, name, version, |(_, driver)| driver) }
}

/// # Safety
/// `version` is null or valid for a write.
unsafe fn report(
    platform: &'static Platform,
    name: &'static str,
    version: *mut c_int,
    pick: fn((c_int, c_int)) -> c_int,
) -> c_int {
    Call::new(platform, name).run(|state, args| {
        // SAFETY: this function's contract.
        let out = unsafe { Out::new(version) }?;
        let value = pick(state.versions.unwrap_or(platform.default_versions));
        out.set(value);
        args.note("version", value);
        Ok(())
    })
}
