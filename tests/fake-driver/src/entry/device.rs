//! Device enumeration and selection: `*GetDeviceCount`, `*GetDevice`, `*SetDevice`,
//! `*MemGetInfo`.
//!
//! ```
//! use fake_driver::{entry::device, Platform};
//! let p = &Platform::EXAMPLE;
//! assert_eq!(device::set_device(p, "cudaSetDevice", 1), 0);
//! assert_eq!(device::set_device(p, "cudaSetDevice", 7), 101);
//! let mut current = -1;
//! // SAFETY: `current` is valid for a write.
//! assert_eq!(unsafe { device::get_device(p, "cudaGetDevice", &mut current) }, 0);
//! assert_eq!(current, 1);
//! ```

use std::ffi::c_int;

use crate::call::Call;
use crate::out::Out;
use crate::platform::{Fault, Platform};

/// `cudaGetDeviceCount(int* count)`. With zero devices it writes 0 and fails with no-device,
/// as the real runtimes do.
///
/// # Safety
/// `count` is null or valid for a write.
pub unsafe fn get_device_count(
    platform: &'static Platform,
    name: &'static str,
    count: *mut c_int,
) -> c_int {
    Call::new(platform, name).run(|state, args| {
        // SAFETY: this function's contract.
        let out = unsafe { Out::new(count) }?;
        let devices = state.devices.count();
        // At most MAX_DEVICE_COUNT, so the cast is lossless.
        out.set(devices as c_int);
        args.note("count", devices);
        if devices == 0 {
            return Err(Fault::NoDevice);
        }
        Ok(())
    })
}

/// `cudaGetDevice(int* device)`: the calling thread's current device.
///
/// # Safety
/// `device` is null or valid for a write.
pub unsafe fn get_device(
    platform: &'static Platform,
    name: &'static str,
    device: *mut c_int,
) -> c_int {
    Call::new(platform, name).run(|state, args| {
        // SAFETY: this function's contract.
        let out = unsafe { Out::new(device) }?;
        let current = state.devices.current()?;
        out.set(current);
        args.note("device", current);
        Ok(())
    })
}

/// `cudaSetDevice(int device)`: sets the calling thread's current device.
pub fn set_device(platform: &'static Platform, name: &'static str, device: c_int) -> c_int {
    Call::new(platform, name)
        .arg("device", device)
        .run(|state, _| state.devices.set_current(device))
}

/// `cudaMemGetInfo(size_t* free, size_t* total)` for the current device: `total` is the
/// device's limit, `free` the limit minus the bytes of live allocations charged to it.
///
/// # Safety
/// `free` and `total` are each null or valid for a write.
pub unsafe fn mem_get_info(
    platform: &'static Platform,
    name: &'static str,
    free: *mut usize,
    total: *mut usize,
) -> c_int {
    Call::new(platform, name).run(|state, args| {
        // SAFETY: this function's contract.
        let (free, total) = unsafe { (Out::new(free)?, Out::new(total)?) };
        let device = state.devices.current()?;
        let (free_bytes, total_bytes) = state.devices.info(device)?;
        let clamp = |bytes: u64| usize::try_from(bytes).unwrap_or(usize::MAX);
        free.set(clamp(free_bytes));
        total.set(clamp(total_bytes));
        args.note("device", device);
        args.note("free", free_bytes);
        args.note("total", total_bytes);
        Ok(())
    })
}
