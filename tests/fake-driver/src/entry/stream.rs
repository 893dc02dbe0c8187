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
            // Later work on the stream waits for the work the event captured.
            if let Some(marker) = waited.marker.clone() {
                stream::submit(state, &target, Box::new(move || marker.wait()))?;
            }
            Ok(())
        })
}
