//! The memory calls whose shape differs between the platforms: `hipHostMalloc`
//! (the pinned allocator) and the synchronous `hipMemcpy`; and `hipMemRangeGetAttribute`, which
//! devmm never calls (tests read the fake's records of prefetches and advice through it).

use std::ffi::c_void;

use fake_driver::entry::memory;

use crate::hipError_t;
use crate::platform::HIP;

/// `hipError_t hipHostMalloc(void** ptr, size_t size, unsigned int flags)`
///
/// # Safety
/// `ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipHostMalloc(
    ptr: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_host(&HIP, "hipHostMalloc", ptr, size, flags) }
}

/// `hipError_t hipMemcpy(void* dst, const void* src, size_t count, hipMemcpyKind kind)`
///
/// # Safety
/// Host-side pointers are valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: std::ffi::c_int,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::memcpy(&HIP, "hipMemcpy", dst, src, count, kind) }
}

/// `hipError_t hipMemRangeGetAttribute(void* data, size_t dataSize, hipMemRangeAttribute attribute, const void* devPtr, size_t count)`:
/// reads back what prefetches and advice recorded on a managed range.
///
/// # Safety
/// `data` is null or valid for `data_size` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn hipMemRangeGetAttribute(
    data: *mut c_void,
    data_size: usize,
    attribute: std::ffi::c_int,
    dev_ptr: *const c_void,
    count: usize,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe {
        fake_driver::entry::managed::range_get_attribute(
            &HIP,
            "hipMemRangeGetAttribute",
            data,
            data_size,
            attribute,
            dev_ptr,
            count,
        )
    }
}
