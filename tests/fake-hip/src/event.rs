//! `hipEventCreateWithFlags`, `hipEventRecord`, `hipEventDestroy`.

use fake_driver::entry::event;

use crate::platform::HIP;
use crate::{hipError_t, hipEvent_t, hipStream_t};

/// `hipError_t hipEventCreateWithFlags(hipEvent_t* event, unsigned int flags)`
///
/// # Safety
/// `event` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipEventCreateWithFlags(event: *mut hipEvent_t, flags: u32) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { event::event_create(&HIP, "hipEventCreateWithFlags", event, flags) }
}

/// `hipError_t hipEventRecord(hipEvent_t event, hipStream_t stream)`
#[no_mangle]
pub extern "C" fn hipEventRecord(event: hipEvent_t, stream: hipStream_t) -> hipError_t {
    event::event_record(&HIP, "hipEventRecord", event, stream)
}

/// `hipError_t hipEventDestroy(hipEvent_t event)`
#[no_mangle]
pub extern "C" fn hipEventDestroy(event: hipEvent_t) -> hipError_t {
    event::event_destroy(&HIP, "hipEventDestroy", event)
}
