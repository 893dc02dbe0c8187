//! Stream capture into graphs: `cudaStreamBeginCapture`, `cudaStreamEndCapture` and
//! `cudaGraphDestroy`. devmm never begins a capture (it only asks `cudaStreamIsCapturing`,
//! generated from the API description); tests begin and end captures through these, as an
//! application capturing a graph would.

use std::ffi::{c_int, c_void};

use fake_driver::entry::stream;

use crate::cudaError_t;
use crate::platform::CUDA;

/// `cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)`
#[no_mangle]
pub extern "C" fn cudaStreamBeginCapture(stream: *mut c_void, mode: c_int) -> cudaError_t {
    stream::begin_capture(&CUDA, "cudaStreamBeginCapture", stream, mode)
}

/// `cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph)`
///
/// # Safety
/// `graph` is null or valid for a write.
#[no_mangle]
pub unsafe extern "C" fn cudaStreamEndCapture(
    stream: *mut c_void,
    graph: *mut *mut c_void,
) -> cudaError_t {
    // SAFETY: this function's contract is the entry point's.
    unsafe { stream::end_capture(&CUDA, "cudaStreamEndCapture", stream, graph) }
}

/// `cudaError_t cudaGraphDestroy(cudaGraph_t graph)`
#[no_mangle]
pub extern "C" fn cudaGraphDestroy(graph: *mut c_void) -> cudaError_t {
    stream::graph_destroy(&CUDA, "cudaGraphDestroy", graph)
}
