//! Managed memory hints: `*MemPrefetchAsync`, `*MemAdvise`, and `*MemRangeGetAttribute` to read
//! them back. Only managed blocks take them (anything else is an invalid value, as on
//! hardware); a target is a device ordinal or the CPU ([`CPU`]), any other ordinal an invalid
//! device. The fake records what was asked, per allocation, when the call is made.
//!
//! ```
//! use fake_driver::{entry::{managed, memory}, Platform};
//! let p = &Platform::EXAMPLE;
//! let mut ptr = std::ptr::null_mut();
//! // SAFETY: `ptr` is valid for a write.
//! assert_eq!(unsafe { memory::malloc_managed(p, "cudaMallocManaged", &mut ptr, 4096, 1) }, 0);
//! assert_eq!(managed::prefetch(p, "cudaMemPrefetchAsync", ptr, 4096, managed::CPU, std::ptr::null_mut()), 0);
//! let mut location = 0;
//! // SAFETY: `location` is valid for 4 bytes.
//! let status = unsafe {
//!     managed::range_get_attribute(p, "cudaMemRangeGetAttribute", (&mut location as *mut i32).cast(),
//!                                  4, managed::LAST_PREFETCH_LOCATION, ptr, 4096)
//! };
//! assert_eq!((status, location), (0, managed::CPU));
//! // An absent device, an unknown advice, and memory that is not managed.
//! assert_eq!(managed::prefetch(p, "cudaMemPrefetchAsync", ptr, 4096, 5, std::ptr::null_mut()), 101);
//! assert_eq!(managed::advise(p, "cudaMemAdvise", ptr, 4096, 7, 0), 1);
//! let mut device = std::ptr::null_mut();
//! // SAFETY: `device` is valid for a write.
//! assert_eq!(unsafe { memory::malloc(p, "cudaMalloc", &mut device, 4096) }, 0);
//! assert_eq!(managed::advise(p, "cudaMemAdvise", device, 4096, 1, 0), 1);
//! assert_eq!(memory::free(p, "cudaFree", device), 0);
//! assert_eq!(memory::free(p, "cudaFree", ptr), 0);
//! ```

use std::ffi::{c_int, c_void};

use crate::call::Call;
use crate::memory::{Advice, Allocation};
use crate::platform::{Fault, Platform};
use crate::state::State;
use crate::stream;

/// `cudaCpuDeviceId` / `hipCpuDeviceId`: the host as a prefetch target or advice location.
pub const CPU: c_int = -1;
/// `cudaInvalidDeviceId` / `hipInvalidDeviceId`: what an unset location reads as.
pub const INVALID_DEVICE: c_int = -2;

/// `cudaMemRangeAttribute` / `hipMemRangeAttribute`: read-mostly (an int, 0 or 1).
pub const READ_MOSTLY: c_int = 1;
/// The preferred location (an int).
pub const PREFERRED_LOCATION: c_int = 2;
/// The processors with accessed-by set (an array of ints, padded with [`INVALID_DEVICE`]).
pub const ACCESSED_BY: c_int = 3;
/// The last prefetch's target (an int).
pub const LAST_PREFETCH_LOCATION: c_int = 4;

/// Checks `device` names a device or the CPU.
fn check_location(state: &State, device: c_int) -> Result<(), Fault> {
    if device == CPU {
        return Ok(());
    }
    state.devices.info(device).map(|_| ())
}

/// The managed block holding `[ptr, ptr + count)`; an empty range or other memory is an
/// invalid value.
fn managed(state: &mut State, ptr: *const c_void, count: usize) -> Result<&mut Allocation, Fault> {
    if count == 0 {
        return Err(Fault::InvalidValue);
    }
    state
        .memory
        .find_managed_mut(ptr, count)
        .ok_or(Fault::InvalidValue)
}

/// `cudaMemPrefetchAsync(const void* devPtr, size_t count, int dstDevice, cudaStream_t stream)`
/// (CUDA 8 to 12; HIP's): records `device` as the range's last prefetch location.
pub fn prefetch(
    platform: &'static Platform,
    name: &'static str,
    ptr: *const c_void,
    count: usize,
    device: c_int,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .arg("count", count)
        .arg("device", device)
        .arg_hex("stream", stream as usize)
        .run(|state, _| {
            check_location(state, device)?;
            stream::resolve(state, platform, stream)?;
            managed(state, ptr, count)?.advice.last_prefetch = Some(device);
            Ok(())
        })
}

/// `cudaMemAdvise(const void* devPtr, size_t count, cudaMemoryAdvise advice, int device)` (CUDA
/// 8 to 12; HIP's). Advice: set/unset read-mostly 1/2 (the device is ignored), set/unset
/// preferred location 3/4, set/unset accessed-by 5/6; any other is an invalid value.
pub fn advise(
    platform: &'static Platform,
    name: &'static str,
    ptr: *const c_void,
    count: usize,
    advice: c_int,
    device: c_int,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("ptr", ptr as usize)
        .arg("count", count)
        .arg("advice", advice)
        .arg("device", device)
        .run(|state, _| {
            if !(1..=6).contains(&advice) {
                return Err(Fault::InvalidValue);
            }
            if matches!(advice, 3 | 5 | 6) {
                check_location(state, device)?;
            }
            let Advice {
                read_mostly,
                preferred,
                accessed_by,
                ..
            } = &mut managed(state, ptr, count)?.advice;
            match advice {
                1 => *read_mostly = true,
                2 => *read_mostly = false,
                3 => *preferred = Some(device),
                4 => *preferred = None,
                5 if !accessed_by.contains(&device) => accessed_by.push(device),
                6 => accessed_by.retain(|&d| d != device),
                _ => {}
            }
            Ok(())
        })
}

/// `cudaMemRangeGetAttribute(void* data, size_t dataSize, cudaMemRangeAttribute attribute,
/// const void* devPtr, size_t count)`: [`READ_MOSTLY`], [`PREFERRED_LOCATION`] and
/// [`LAST_PREFETCH_LOCATION`] write one int (`dataSize` 4), [`ACCESSED_BY`] a multiple of 4
/// bytes; other attributes or sizes are an invalid value.
///
/// # Safety
/// `data` is null or valid for `data_size` bytes of writes.
pub unsafe fn range_get_attribute(
    platform: &'static Platform,
    name: &'static str,
    data: *mut c_void,
    data_size: usize,
    attribute: c_int,
    ptr: *const c_void,
    count: usize,
) -> c_int {
    Call::new(platform, name)
        .arg("attribute", attribute)
        .arg_hex("ptr", ptr as usize)
        .arg("count", count)
        .run(|state, args| {
            let advice = &managed(state, ptr, count)?.advice;
            let values: Vec<c_int> = match attribute {
                READ_MOSTLY => vec![c_int::from(advice.read_mostly)],
                PREFERRED_LOCATION => vec![advice.preferred.unwrap_or(INVALID_DEVICE)],
                LAST_PREFETCH_LOCATION => vec![advice.last_prefetch.unwrap_or(INVALID_DEVICE)],
                ACCESSED_BY => advice.accessed_by.clone(),
                _ => return Err(Fault::InvalidValue),
            };
            let slots = data_size / size_of::<c_int>();
            let fits = if attribute == ACCESSED_BY {
                slots > 0 && data_size.is_multiple_of(size_of::<c_int>())
            } else {
                data_size == size_of::<c_int>()
            };
            if data.is_null() || !fits {
                return Err(Fault::InvalidValue);
            }
            let data = data.cast::<c_int>();
            for slot in 0..slots {
                let value = values.get(slot).copied().unwrap_or(INVALID_DEVICE);
                args.note("value", value);
                // SAFETY: `slot < data_size / 4` and the caller gives `data_size` writable bytes;
                // `write_unaligned` because C's `void*` promises no alignment.
                unsafe { data.add(slot).write_unaligned(value) };
            }
            Ok(())
        })
}
