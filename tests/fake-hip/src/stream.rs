//! `hipStreamCreateWithFlags`, `hipStreamDestroy`, `hipStreamSynchronize`,
//! `hipStreamWaitEvent`.

use fake_driver::entry::stream;

use crate::platform::HIP;
use crate::{hipError_t, hipEvent_t, hipStream_t};

/// `hipError_t hipStreamCreateWithFlags(hipStream_t* pStream, unsigned int flags)`
///
/// # Safety
/// `stream` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipStreamCreateWithFlags(
    stream: *mut hipStream_t,
    flags: u32,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { stream::stream_create(&HIP, "hipStreamCreateWithFlags", stream, flags) }
}

/// `hipError_t hipStreamDestroy(hipStream_t stream)`
#[no_mangle]
pub extern "C" fn hipStreamDestroy(stream: hipStream_t) -> hipError_t {
    stream::stream_destroy(&HIP, "hipStreamDestroy", stream)
}

/// `hipError_t hipStreamSynchronize(hipStream_t stream)`
#[no_mangle]
pub extern "C" fn hipStreamSynchronize(stream: hipStream_t) -> hipError_t {
    stream::stream_synchronize(&HIP, "hipStreamSynchronize", stream)
}

/// `hipError_t hipStreamWaitEvent(hipStream_t stream, hipEvent_t event, unsigned int flags)`
#[no_mangle]
pub extern "C" fn hipStreamWaitEvent(
    stream: hipStream_t,
    event: hipEvent_t,
    flags: u32,
) -> hipError_t {
    stream::stream_wait_event(&HIP, "hipStreamWaitEvent", stream, event, flags)
}
