//! Stream capture into graphs: `hipStreamBeginCapture`, `hipStreamEndCapture` and
//! `hipGraphDestroy`. devmm never begins a capture (it only asks `hipStreamIsCapturing`,
//! generated from the API description); tests begin and end captures through these, as an
//! application capturing a graph would.

use std::ffi::{c_int, c_void};

use fake_driver::entry::stream;

use crate::hipError_t;
use crate::platform::HIP;

/// `hipError_t hipStreamBeginCapture(hipStream_t stream, hipStreamCaptureMode mode)`
#[no_mangle]
pub extern "C" fn hipStreamBeginCapture(stream: *mut c_void, mode: c_int) -> hipError_t {
    stream::begin_capture(&HIP, "hipStreamBeginCapture", stream, mode)
}

/// `hipError_t hipStreamEndCapture(hipStream_t stream, hipGraph_t* pGraph)`
///
/// # Safety
/// `graph` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn hipStreamEndCapture(
    stream: *mut c_void,
    graph: *mut *mut c_void,
) -> hipError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { stream::end_capture(&HIP, "hipStreamEndCapture", stream, graph) }
}

/// `hipError_t hipGraphDestroy(hipGraph_t graph)`
#[no_mangle]
pub extern "C" fn hipGraphDestroy(graph: *mut c_void) -> hipError_t {
    stream::graph_destroy(&HIP, "hipGraphDestroy", graph)
}
