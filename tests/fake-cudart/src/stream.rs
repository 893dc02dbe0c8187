//! `cudaStreamCreateWithFlags`, `cudaStreamDestroy`, `cudaStreamSynchronize`,
//! `cudaStreamWaitEvent`.

use fake_driver::entry::stream;

use crate::platform::CUDA;
use crate::{cudaError_t, cudaEvent_t, cudaStream_t};

/// `cudaError_t cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags)`
///
/// # Safety
/// `stream` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamCreateWithFlags(
    stream: *mut cudaStream_t,
    flags: u32,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { stream::stream_create(&CUDA, "cudaStreamCreateWithFlags", stream, flags) }
}

/// `cudaError_t cudaStreamDestroy(cudaStream_t stream)`
#[no_mangle]
pub extern "C" fn cudaStreamDestroy(stream: cudaStream_t) -> cudaError_t {
    stream::stream_destroy(&CUDA, "cudaStreamDestroy", stream)
}

/// `cudaError_t cudaStreamSynchronize(cudaStream_t stream)`
#[no_mangle]
pub extern "C" fn cudaStreamSynchronize(stream: cudaStream_t) -> cudaError_t {
    stream::stream_synchronize(&CUDA, "cudaStreamSynchronize", stream)
}

/// `cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)`
#[no_mangle]
pub extern "C" fn cudaStreamWaitEvent(
    stream: cudaStream_t,
    event: cudaEvent_t,
    flags: u32,
) -> cudaError_t {
    stream::stream_wait_event(&CUDA, "cudaStreamWaitEvent", stream, event, flags)
}
