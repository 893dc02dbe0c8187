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
        .run(|state, _| {
            state
                .devices
                .set_current(device, platform.set_device_activates)
        })
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
        let device = state.devices.current_with_context()?;
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

/// `cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device)`: memory-pool support
/// (per device, see `fake_set_pools`), host-pool support (a device with pools, on a runtime
/// with the location), unified addressing (per device, see `fake_set_unified_addressing`),
/// concurrent managed access (per device, see `fake_set_concurrent_managed_access`), the
/// host NUMA node closest to it (see `fake_set_host_numa_id`) and the compute capability; other
/// attributes are invalid values.
///
/// # Safety
/// `value` is null or valid for a write.
pub unsafe fn device_get_attribute(
    platform: &'static Platform,
    name: &'static str,
    value: *mut c_int,
    attr: c_int,
    device: c_int,
) -> c_int {
    Call::new(platform, name)
        .arg("attr", attr)
        .arg("device", device)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(value) }?;
            let attributes = platform.attributes;
            let answer = if attr == attributes.memory_pools_supported {
                c_int::from(state.devices.pools_supported(device)?)
            } else if attr == attributes.unified_addressing {
                c_int::from(state.devices.unified_addressing(device)?)
            } else if attr == attributes.concurrent_managed_access {
                c_int::from(state.devices.concurrent_managed_access(device)?)
            } else if let Some((numa, host)) = attributes
                .host_pools_supported
                .filter(|&(numa, host)| attr == numa || attr == host)
            {
                let runtime = state.versions.unwrap_or(platform.default_versions).0;
                let since = match attr {
                    a if a == numa => platform.host_pools_since,
                    a if a == host => Some(crate::platform::HOST_LOCATION_SINCE),
                    _ => None,
                };
                let located = since.is_some_and(|since| runtime >= since);
                c_int::from(located && state.devices.pools_supported(device)?)
            } else if attributes.host_numa_id == Some(attr) {
                state.devices.host_numa_id(device)?
            } else {
                state.devices.pools_supported(device)?; // the device must exist
                match attributes.compute_capability {
                    Some((major, _)) if attr == major => attributes.capability.0,
                    Some((_, minor)) if attr == minor => attributes.capability.1,
                    _ => return Err(Fault::InvalidValue),
                }
            };
            out.set(answer);
            args.note("value", answer);
            Ok(())
        })
}

/// `cudaDeviceGetPCIBusId(char* pciBusId, int len, int device)`: `0000:NN:00.0`, NN = 0x10 +
/// the ordinal, written like `snprintf` (an invalid value if it does not fit).
///
/// # Safety
/// `bus_id` is null or valid for `len` bytes of writes.
pub unsafe fn device_get_pci_bus_id(
    platform: &'static Platform,
    name: &'static str,
    bus_id: *mut std::ffi::c_char,
    len: c_int,
    device: c_int,
) -> c_int {
    Call::new(platform, name)
        .arg("len", len)
        .arg("device", device)
        .run(|state, _| {
            let physical = state.devices.physical(device)?;
            let text = format!("0000:{:02x}:00.0\0", 0x10 + physical);
            let fits = usize::try_from(len).is_ok_and(|len| len >= text.len());
            if bus_id.is_null() || !fits {
                return Err(Fault::InvalidValue);
            }
            // SAFETY: `bus_id` holds `len >= text.len()` bytes by this function's contract.
            unsafe { std::ptr::copy_nonoverlapping(text.as_ptr().cast(), bus_id, text.len()) };
            Ok(())
        })
}

/// `cudaGetDeviceProperties(cudaDeviceProp* prop, int device)`: the fake fills only `name`, the
/// struct's first member on every version (`char[256]`), and leaves the rest untouched.
///
/// # Safety
/// `prop` is null or valid for 256 bytes of writes.
pub unsafe fn get_device_properties(
    platform: &'static Platform,
    name: &'static str,
    prop: *mut std::ffi::c_void,
    device: c_int,
) -> c_int {
    Call::new(platform, name)
        .arg("device", device)
        .run(|state, _| {
            state.devices.pools_supported(device)?; // the device must exist
            if prop.is_null() {
                return Err(Fault::InvalidValue);
            }
            let text = format!("{} {device}\0", platform.device_name);
            // SAFETY: `prop` holds at least 256 bytes (the name field) by this function's
            // contract, and the name is far shorter.
            unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), prop.cast(), text.len()) };
            Ok(())
        })
}

/// `cudaDeviceSynchronize(void)`: blocks until the work queued so far on every stream has run
/// (the fake does not tell devices apart here: waiting for more is still correct). Refused
/// while a stream of the device captures: its captured work is not there to wait for.
pub fn device_synchronize(platform: &'static Platform, name: &'static str) -> c_int {
    let mut pending = Vec::new();
    let code = Call::new(platform, name).run(|state, _| {
        let device = state.devices.current_with_context()?;
        state.captures.check_device_synchronize(device)?;
        pending = crate::stream::all_work(state);
        Ok(())
    });
    pending.iter().for_each(crate::queue::Marker::wait);
    crate::stream::synchronized();
    code
}

/// `cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active)` (and HIP's
/// `hipDevicePrimaryCtxGetState`): whether the device has a context (HIP: whether it is active,
/// `Platform::set_device_activates`); flags are 0.
///
/// # Safety
/// `flags` and `active` are null or valid for writes.
pub unsafe fn primary_ctx_get_state(
    platform: &'static Platform,
    name: &'static str,
    device: c_int,
    flags: *mut std::ffi::c_uint,
    active: *mut c_int,
) -> c_int {
    Call::new(platform, name)
        .arg("device", device)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let (flags, active) = unsafe { (Out::new(flags)?, Out::new(active)?) };
            let has = state.devices.has_context(device)?;
            flags.set(0);
            active.set(c_int::from(has));
            args.note("active", has);
            Ok(())
        })
}
