//! The memory calls whose shape differs between the platforms: `cudaMallocHost`
//! (the pinned allocator) and the synchronous `cudaMemcpy`; and `cudaMemRangeGetAttribute`, which
//! devmm never calls (tests read the fake's records of prefetches and advice through it).

use std::ffi::c_void;

use fake_driver::entry::memory;

use crate::cudaError_t;
use crate::platform::CUDA;

/// `cudaError_t cudaMallocHost(void** ptr, size_t size)`
///
/// # Safety
/// `ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_host(&CUDA, "cudaMallocHost", ptr, size, 0) }
}

/// `cudaError_t cudaMemcpy(void* dst, const void* src, size_t count, cudaMemcpyKind kind)`
///
/// # Safety
/// Host-side pointers are valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn cudaMemcpy(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: std::ffi::c_int,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::memcpy(&CUDA, "cudaMemcpy", dst, src, count, kind) }
}

/// `cudaError_t cudaMemRangeGetAttribute(void* data, size_t dataSize, cudaMemRangeAttribute attribute, const void* devPtr, size_t count)`:
/// reads back what prefetches and advice recorded on a managed range.
///
/// # Safety
/// `data` is null or valid for `data_size` bytes of writes.
#[no_mangle]
pub unsafe extern "C" fn cudaMemRangeGetAttribute(
    data: *mut c_void,
    data_size: usize,
    attribute: std::ffi::c_int,
    dev_ptr: *const c_void,
    count: usize,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe {
        fake_driver::entry::managed::range_get_attribute(
            &CUDA,
            "cudaMemRangeGetAttribute",
            data,
            data_size,
            attribute,
            dev_ptr,
            count,
        )
    }
}
