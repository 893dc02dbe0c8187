//! Streams. Work is done synchronously at call time, so a stream only needs to remember its
//! device: the fake checks that handles are live and that events and streams match devices.

use std::ffi::{c_int, c_void};

use crate::platform::{Fault, Platform};
use crate::state::State;

#[derive(Debug)]
pub(crate) struct Stream {
    pub(crate) device: c_int,
}

/// The device a stream handle belongs to: a created stream's own device, or for a sentinel
/// stream (0, legacy, per-thread) the calling thread's current device.
pub(crate) fn device_of(
    state: &State,
    platform: &Platform,
    stream: *mut c_void,
) -> Result<c_int, Fault> {
    let handle = stream as usize;
    if platform.is_builtin_stream(handle) {
        state.devices.current()
    } else {
        Ok(state.streams.get(handle)?.device)
    }
}
