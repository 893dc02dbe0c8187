//! Streams: `*StreamCreateWithFlags`, `*StreamDestroy`, `*StreamSynchronize`,
//! `*StreamWaitEvent`. The platform's sentinel streams are always valid and can't be destroyed.
//! Work queued on a stream runs on its own thread (see the crate docs).
//!
//! ```
//! use fake_driver::{entry::stream, Platform};
//! let p = &Platform::EXAMPLE;
//! let legacy = std::ptr::without_provenance_mut(1);
//! assert_eq!(stream::stream_synchronize(p, "cudaStreamSynchronize", legacy), 0);
//! assert_eq!(stream::stream_destroy(p, "cudaStreamDestroy", legacy), 400);
//! ```

use std::ffi::{c_int, c_void};

use crate::call::Call;
use crate::capture::{self, CaptureFault};
use crate::handle;
use crate::out::Out;
use crate::platform::{Fault, Platform};
use crate::queue::Queue;
use crate::stream::{self, Stream};

/// `cudaStreamCreateWithFlags(cudaStream_t* pStream, unsigned int flags)` on the current device.
///
/// # Safety
/// `out` is null or valid for a write.
pub unsafe fn stream_create(
    platform: &'static Platform,
    name: &'static str,
    out: *mut *mut c_void,
    flags: u32,
) -> c_int {
    Call::new(platform, name)
        .arg("flags", flags)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(out) }?;
            if flags & !platform.stream_flags != 0 {
                return Err(Fault::InvalidValue);
            }
            let device = state.devices.current_with_context()?;
            let created = state.streams.insert(Stream {
                device,
                flags,
                queue: Queue::default(),
            });
            out.set(handle::to_ptr(created));
            args.note("device", device);
            args.note_hex("stream", created);
            Ok(())
        })
}

/// `cudaStreamDestroy(cudaStream_t stream)`: the handle is invalid afterwards; work already
/// queued on it still runs. Built-in streams cannot be destroyed.
pub fn stream_destroy(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .run(|state, _| {
            if platform.is_builtin_stream(stream as usize) {
                return Err(Fault::InvalidHandle);
            }
            let destroyed = state.streams.remove(stream as usize)?;
            state.builtin_queues.retire(destroyed.queue);
            Ok(())
        })
}

/// `cudaStreamSynchronize(cudaStream_t stream)`: blocks until the work queued on the stream so
/// far has run (for the legacy stream, also the blocking streams' work it is ordered after).
pub fn stream_synchronize(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
) -> c_int {
    let mut done = None;
    let code = Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .run(|state, _| {
            let target = stream::resolve(state, platform, stream)?;
            if state.captures.status(target.key) != capture::STATUS_NONE {
                // Captured work has not run and will not: there is nothing to wait for.
                let key = target.key;
                return Err(state.captures.refuse_on(key, CaptureFault::Unsupported));
            }
            done = Some(stream::fence(state, &target)?);
            Ok(())
        });
    if let Some(done) = done {
        done.wait();
        stream::synchronized();
    }
    code
}

/// `cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned int flags)`. The log
/// line also names the stream the event was last recorded on (`recorded_on=none` if never).
/// Under stream capture, the capture rules decide (see the crate docs): a wait on a captured
/// event joins the stream to its capture; a capturing stream may wait on an event recorded
/// outside its capture only with the external flag (`cudaEventWaitExternal`).
pub fn stream_wait_event(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
    event: *mut c_void,
    flags: u32,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .arg_hex("event", event as usize)
        .arg("flags", flags)
        .run(|state, args| {
            if flags & !platform.wait_flags != 0 {
                return Err(Fault::InvalidValue);
            }
            let target = stream::resolve(state, platform, stream)?;
            let waited = state.events.get(event as usize)?;
            match waited.recorded_on {
                Some(recorded_on) => args.note_hex("recorded_on", recorded_on),
                None => args.note("recorded_on", "none"),
            }
            let (marker, captured) = (waited.marker.clone(), waited.captured);
            let external = flags & WAIT_EXTERNAL != 0 && platform.wait_flags & WAIT_EXTERNAL != 0;
            if state.captures.wait(target.key, captured, external)? {
                return Ok(());
            }
            // Later work on the stream waits for the work the event captured.
            if let Some(marker) = marker {
                stream::submit(state, &target, Box::new(move || marker.wait()))?;
            }
            Ok(())
        })
}

/// `cudaEventWaitExternal`: the wait is an external event node of the capture.
const WAIT_EXTERNAL: u32 = 0x1;

/// `cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode)`: the stream's
/// work is captured from now on. Not on the legacy stream, nor on a stream already capturing.
pub fn begin_capture(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
    mode: c_int,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .arg("mode", mode)
        .run(|state, _| {
            let mode = capture::Mode::from_raw(mode)?;
            let target = stream::resolve(state, platform, stream)?;
            state.captures.begin(target.key, target.device, mode)
        })
}

/// `cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t* pGraph)`: ends the capture begun on
/// `stream` (its joined streams leave it too) and writes the graph, or null with the error of
/// an invalidated or unjoined capture.
///
/// # Safety
/// `graph` is null or valid for a write.
pub unsafe fn end_capture(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
    graph: *mut *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(graph) }?;
            let target = stream::resolve(state, platform, stream)?;
            if let Err(fault) = state.captures.end(target.key) {
                out.set(std::ptr::null_mut());
                return Err(fault);
            }
            let made = state.graphs.insert(());
            out.set(handle::to_ptr(made));
            args.note_hex("graph", made);
            Ok(())
        })
}

/// `cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus* pCaptureStatus)`:
/// none 0, active 1, invalidated 2. Asking about the legacy stream while a blocking stream
/// of its device captures is refused, as any use of it is, but leaves that capture intact.
///
/// # Safety
/// `status` is null or valid for a write.
pub unsafe fn is_capturing(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
    status: *mut c_int,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .run(|state, args| {
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(status) }?;
            let target = stream::resolve_as(state, platform, stream, stream::LegacyUse::Query)?;
            let answer = state.captures.status(target.key);
            out.set(answer);
            args.note("status", answer);
            Ok(())
        })
}

/// `cudaStreamGetCaptureInfo` in CUDA 13's shape (stream, status, id, graph, dependencies,
/// edge data, their count), of which devmm passes the first three: the status as
/// [`is_capturing`] answers it, and the capture's id where the stream captures. Asking
/// about the legacy stream while a blocking stream captures is refused without invalidating
/// the capture, as `*StreamIsCapturing` is. Any trailing out-parameter given is refused:
/// the CUDA 12 and HIP symbols of this name do not take them.
///
/// # Safety
/// `status` and `id` are null or valid for a write.
#[allow(clippy::too_many_arguments)]
pub unsafe fn capture_info(
    platform: &'static Platform,
    name: &'static str,
    stream: *mut c_void,
    status: *mut c_int,
    id: *mut u64,
    graph: *mut c_void,
    dependencies: *mut c_void,
    edge_data: *mut c_void,
    count: *mut usize,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("stream", stream as usize)
        .run(|state, args| {
            if !graph.is_null()
                || !dependencies.is_null()
                || !edge_data.is_null()
                || !count.is_null()
            {
                return Err(Fault::InvalidValue);
            }
            // SAFETY: this function's contract.
            let out = unsafe { Out::new(status) }?;
            let target = stream::resolve_as(state, platform, stream, stream::LegacyUse::Query)?;
            let answer = state.captures.status(target.key);
            out.set(answer);
            args.note("status", answer);
            if let (false, Some(capture)) = (id.is_null(), state.captures.id(target.key)) {
                // SAFETY: non-null, and valid for a write by this function's contract.
                unsafe { id.write(capture) };
                args.note("id", capture);
            }
            Ok(())
        })
}

/// `cudaGraphDestroy(cudaGraph_t graph)`: the handle is invalid afterwards.
pub fn graph_destroy(platform: &'static Platform, name: &'static str, graph: *mut c_void) -> c_int {
    Call::new(platform, name)
        .arg_hex("graph", graph as usize)
        .run(|state, _| state.graphs.remove(graph as usize))
}
