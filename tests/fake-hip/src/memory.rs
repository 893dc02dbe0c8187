//! `hipMalloc`, `hipFree`, `hipMallocAsync`, `hipFreeAsync`, `hipHostMalloc`,
//! `hipHostFree`, `hipMallocManaged`, `hipMemcpy`, `hipMemcpyAsync`.

use std::ffi::c_void;

use fake_driver::entry::memory;

use crate::platform::HIP;
use crate::{hipError_t, hipMemcpyKind, hipStream_t};

/// `hipError_t hipMalloc(void** devPtr, size_t size)`
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipMalloc(dev_ptr: *mut *mut c_void, size: usize) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc(&HIP, "hipMalloc", dev_ptr, size) }
}

/// `hipError_t hipFree(void* devPtr)`
#[no_mangle]
pub extern "C" fn hipFree(dev_ptr: *mut c_void) -> hipError_t {
    memory::free(&HIP, "hipFree", dev_ptr)
}

/// `hipError_t hipMallocAsync(void** devPtr, size_t size, hipStream_t hStream)`
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub unsafe extern "C" fn hipMallocAsync(
    dev_ptr: *mut *mut c_void,
    size: usize,
    stream: hipStream_t,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_async(&HIP, "hipMallocAsync", dev_ptr, size, stream) }
}

/// `hipError_t hipFreeAsync(void* devPtr, hipStream_t hStream)`
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub extern "C" fn hipFreeAsync(dev_ptr: *mut c_void, stream: hipStream_t) -> hipError_t {
    memory::free_async(&HIP, "hipFreeAsync", dev_ptr, stream)
}

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

/// `hipError_t hipHostFree(void* ptr)`
#[no_mangle]
pub extern "C" fn hipHostFree(ptr: *mut c_void) -> hipError_t {
    memory::free_host(&HIP, "hipHostFree", ptr)
}

/// `hipError_t hipMallocManaged(void** devPtr, size_t size, unsigned int flags)`
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipMallocManaged(
    dev_ptr: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_managed(&HIP, "hipMallocManaged", dev_ptr, size, flags) }
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
    kind: hipMemcpyKind,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::memcpy(&HIP, "hipMemcpy", dst, src, count, kind) }
}

/// `hipError_t hipMemcpyAsync(void* dst, const void* src, size_t count, hipMemcpyKind kind,
/// hipStream_t stream)`
///
/// # Safety
/// Host-side pointers are valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn hipMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: hipMemcpyKind,
    stream: hipStream_t,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::memcpy_async(&HIP, "hipMemcpyAsync", dst, src, count, kind, stream) }
}
