//! `cudaMalloc`, `cudaFree`, `cudaMallocAsync`, `cudaFreeAsync`, `cudaMallocHost`,
//! `cudaFreeHost`, `cudaMallocManaged`, `cudaMemcpy`, `cudaMemcpyAsync`.

use std::ffi::c_void;

use fake_driver::entry::memory;

use crate::platform::CUDA;
use crate::{cudaError_t, cudaMemcpyKind, cudaStream_t};

/// `cudaError_t cudaMalloc(void** devPtr, size_t size)`
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaMalloc(dev_ptr: *mut *mut c_void, size: usize) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc(&CUDA, "cudaMalloc", dev_ptr, size) }
}

/// `cudaError_t cudaFree(void* devPtr)`
#[no_mangle]
pub extern "C" fn cudaFree(dev_ptr: *mut c_void) -> cudaError_t {
    memory::free(&CUDA, "cudaFree", dev_ptr)
}

/// `cudaError_t cudaMallocAsync(void** devPtr, size_t size, cudaStream_t hStream)`
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub unsafe extern "C" fn cudaMallocAsync(
    dev_ptr: *mut *mut c_void,
    size: usize,
    stream: cudaStream_t,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_async(&CUDA, "cudaMallocAsync", dev_ptr, size, stream) }
}

/// `cudaError_t cudaFreeAsync(void* devPtr, cudaStream_t hStream)`
#[cfg(feature = "stream-ordered")]
#[no_mangle]
pub extern "C" fn cudaFreeAsync(dev_ptr: *mut c_void, stream: cudaStream_t) -> cudaError_t {
    memory::free_async(&CUDA, "cudaFreeAsync", dev_ptr, stream)
}

/// `cudaError_t cudaMallocHost(void** ptr, size_t size)`
///
/// # Safety
/// `ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocHost(ptr: *mut *mut c_void, size: usize) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_host(&CUDA, "cudaMallocHost", ptr, size, 0) }
}

/// `cudaError_t cudaFreeHost(void* ptr)`
#[no_mangle]
pub extern "C" fn cudaFreeHost(ptr: *mut c_void) -> cudaError_t {
    memory::free_host(&CUDA, "cudaFreeHost", ptr)
}

/// `cudaError_t cudaMallocManaged(void** devPtr, size_t size, unsigned int flags)`
///
/// # Safety
/// `dev_ptr` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaMallocManaged(
    dev_ptr: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::malloc_managed(&CUDA, "cudaMallocManaged", dev_ptr, size, flags) }
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
    kind: cudaMemcpyKind,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::memcpy(&CUDA, "cudaMemcpy", dst, src, count, kind) }
}

/// `cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t count, cudaMemcpyKind kind,
/// cudaStream_t stream)`
///
/// # Safety
/// Host-side pointers are valid for `count` bytes.
#[no_mangle]
pub unsafe extern "C" fn cudaMemcpyAsync(
    dst: *mut c_void,
    src: *const c_void,
    count: usize,
    kind: cudaMemcpyKind,
    stream: cudaStream_t,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { memory::memcpy_async(&CUDA, "cudaMemcpyAsync", dst, src, count, kind, stream) }
}
