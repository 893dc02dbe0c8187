//! `cudaEventCreateWithFlags`, `cudaEventRecord`, `cudaEventDestroy`.

use fake_driver::entry::event;

use crate::platform::CUDA;
use crate::{cudaError_t, cudaEvent_t, cudaStream_t};

/// `cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags)`
///
/// # Safety
/// `event` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaEventCreateWithFlags(
    event: *mut cudaEvent_t,
    flags: u32,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { event::event_create(&CUDA, "cudaEventCreateWithFlags", event, flags) }
}

/// `cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream)`
#[no_mangle]
pub extern "C" fn cudaEventRecord(event: cudaEvent_t, stream: cudaStream_t) -> cudaError_t {
    event::event_record(&CUDA, "cudaEventRecord", event, stream)
}

/// `cudaError_t cudaEventDestroy(cudaEvent_t event)`
#[no_mangle]
pub extern "C" fn cudaEventDestroy(event: cudaEvent_t) -> cudaError_t {
    event::event_destroy(&CUDA, "cudaEventDestroy", event)
}
