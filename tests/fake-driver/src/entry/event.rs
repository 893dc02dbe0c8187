//! Events: `*EventCreateWithFlags`, `*EventRecord`, `*EventDestroy`.
//!
//! ```
//! use fake_driver::{entry::event, Platform};
//! // Out of strict mode, a destroyed handle is an error rather than an abort.
//! fake_driver::control::fake_set_strict(0);
//! let p = &Platform::EXAMPLE;
//! let mut e = std::ptr::null_mut();
//! // SAFETY: `e` is valid for a write.
//! assert_eq!(unsafe { event::event_create(p, "cudaEventCreateWithFlags", &mut e, 2) }, 0);
//! assert_eq!(event::event_record(p, "cudaEventRecord", e, std::ptr::null_mut()), 0);
//! assert_eq!(event::event_destroy(p, "cudaEventDestroy", e), 0);
//! assert_eq!(event::event_record(p, "cudaEventRecord", e, std::ptr::null_mut()), 400);
//! ```

use std::ffi::{c_int, c_void};

use crate::call::Call;
use crate::event::Event;
use crate::handle;
use crate::out::Out;
use crate::platform::{Fault, Platform};
use crate::stream;

/// `cudaEventCreateWithFlags(cudaEvent_t* event, unsigned int flags)` on the current device.
///
/// # Safety
/// `out` is null or valid for a write.
pub unsafe fn event_create(
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
            if flags & !platform.event_flags != 0 {
                return Err(Fault::InvalidValue);
            }
            let device = state.devices.current_with_context()?;
            let created = state.events.insert(Event {
                device,
                recorded_on: None,
                marker: None,
                captured: None,
            });
            out.set(handle::to_ptr(created));
            args.note("device", device);
            args.note_hex("event", created);
            Ok(())
        })
}

/// `cudaEventRecord(cudaEvent_t event, cudaStream_t stream)`. As on real hardware, the event
/// and the stream must belong to the same device (else invalid handle).
pub fn event_record(
    platform: &'static Platform,
    name: &'static str,
    event: *mut c_void,
    stream: *mut c_void,
) -> c_int {
    Call::new(platform, name)
        .arg_hex("event", event as usize)
        .arg_hex("stream", stream as usize)
        .run(|state, _| {
            let event_device = state.events.get(event as usize)?.device;
            let target = stream::resolve(state, platform, stream)?;
            if event_device != target.device {
                return Err(Fault::InvalidHandle);
            }
            // The event completes when the work queued so far (legacy ordering included) has
            // run; on a capturing stream it stands for the captured work instead.
            let marker = stream::fence(state, &target)?;
            let captured = state.captures.record(target.key);
            let recorded = state.events.get_mut(event as usize)?;
            recorded.recorded_on = Some(stream as usize);
            recorded.marker = captured.is_none().then_some(marker);
            recorded.captured = captured;
            Ok(())
        })
}

/// `cudaEventDestroy(cudaEvent_t event)`: the handle is invalid afterwards.
pub fn event_destroy(platform: &'static Platform, name: &'static str, event: *mut c_void) -> c_int {
    Call::new(platform, name)
        .arg_hex("event", event as usize)
        .run(|state, _| state.events.remove(event as usize).map(drop))
}
