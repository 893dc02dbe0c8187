//! The library's whole mutable state behind one mutex, so every entry point is thread-safe.

use std::ffi::c_int;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};

use crate::device::Devices;
use crate::event::Event;
use crate::handle::Handles;
use crate::inject::Injections;
use crate::log::CallLog;
use crate::memory::Memory;
use crate::stream::Stream;

/// Everything `fake_reset` puts back to its initial value.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) devices: Devices,
    pub(crate) memory: Memory,
    pub(crate) streams: Handles<Stream>,
    pub(crate) events: Handles<Event>,
    pub(crate) log: CallLog,
    pub(crate) injections: Injections,
    /// `(runtime, driver)` set by `fake_set_version`; `None` means the platform's default.
    pub(crate) versions: Option<(c_int, c_int)>,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(Mutex::default);

/// Locks the state. A panic caught while the lock was held leaves the state consistent enough
/// for a test double (each mutation is a single map or counter update), so poison is ignored
/// rather than turning every later call into an error.
pub(crate) fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}
