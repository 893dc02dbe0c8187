//! The library's whole mutable state behind one mutex, so every entry point is thread-safe.

use std::collections::HashMap;
use std::ffi::c_int;
use std::sync::{LazyLock, Mutex, MutexGuard, PoisonError};
use std::thread::ThreadId;

use crate::capture::Captures;
use crate::device::Devices;
use crate::event::Event;
use crate::handle::Handles;
use crate::inject::Injections;
use crate::log::CallLog;
use crate::memory::Memory;
use crate::pool::Pools;
use crate::stream::{BuiltinQueues, Stream};

/// What kind of machine the library plays, set by `fake_set_mode` or, for processes the tests
/// start, by the environment (`FAKE_DRIVER_LENIENT=1`, `FAKE_DRIVER_NO_DRIVER=1`,
/// `FAKE_DRIVER_NO_POOLS=1`, read at load and at every reset). `FAKE_DRIVER_NO_DRIVER` may
/// instead name a file (`libcudart.so.13`): only a copy of the library loaded under that file
/// name plays a library without a driver, so a discovery test can put a runtime that loads but
/// cannot run ahead of one that can.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mode {
    /// Dead handles abort the process (the default), as on hardware; else they are errors.
    pub(crate) strict: bool,
    /// A library without a driver: every status call returns insufficient-driver.
    pub(crate) no_driver: bool,
}

impl Mode {
    fn from_env() -> Mode {
        let set = |name: &str| std::env::var_os(name).is_some_and(|v| v == "1");
        Mode {
            strict: !set("FAKE_DRIVER_LENIENT"),
            no_driver: set("FAKE_DRIVER_NO_DRIVER") || no_driver_for_this_file(),
        }
    }
}

/// Whether `FAKE_DRIVER_NO_DRIVER` names this library's own file.
fn no_driver_for_this_file() -> bool {
    let Some(wanted) = std::env::var_os("FAKE_DRIVER_NO_DRIVER").filter(|v| v != "1") else {
        return false;
    };
    own_file().is_some_and(|path| path.file_name() == Some(wanted.as_os_str()))
}

/// The file this library was loaded from: the mapping of `/proc/self/maps` that holds this
/// function's code.
fn own_file() -> Option<std::path::PathBuf> {
    let here = own_file as fn() -> Option<std::path::PathBuf> as usize;
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    maps.lines().find_map(|line| {
        // `start-end perms offset dev inode path`
        let mut fields = line.split_whitespace();
        let (start, end) = fields.next()?.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        let path = fields.nth(4)?;
        (start <= here && here < end).then(|| std::path::PathBuf::from(path))
    })
}

impl Default for Mode {
    fn default() -> Mode {
        Mode::from_env()
    }
}

/// Everything `fake_reset` puts back to its initial value.
#[derive(Debug, Default)]
pub(crate) struct State {
    pub(crate) mode: Mode,
    pub(crate) builtin_queues: BuiltinQueues,
    /// The runtime's last error, per thread (`*GetLastError`, `*PeekAtLastError`).
    pub(crate) last_error: HashMap<ThreadId, c_int>,
    pub(crate) devices: Devices,
    pub(crate) memory: Memory,
    /// Pools made with `*MemPoolCreate`.
    pub(crate) pools: Pools,
    /// The files `*Malloc` blocks live in, so another process can map them.
    pub(crate) legacy: crate::ipc::Legacy,
    pub(crate) streams: Handles<Stream>,
    pub(crate) events: Handles<Event>,
    /// Active stream captures.
    pub(crate) captures: Captures,
    /// Graphs `*StreamEndCapture` made, until `*GraphDestroy`.
    pub(crate) graphs: Handles<()>,
    pub(crate) log: CallLog,
    pub(crate) injections: Injections,
    /// `(runtime, driver)` set by `fake_set_version`; `None` means the platform's default.
    pub(crate) versions: Option<(c_int, c_int)>,
    /// The process that initialised the library (made its first status call): the runtime
    /// belongs to it, and a process forked from it gets the initialisation error.
    pub(crate) owner: Option<u32>,
}

static STATE: LazyLock<Mutex<State>> = LazyLock::new(Mutex::default);

/// Locks the state. A panic caught while the lock was held leaves the state consistent enough
/// for a test double (each mutation is a single map or counter update), so poison is ignored
/// rather than turning every later call into an error.
pub(crate) fn lock() -> MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(PoisonError::into_inner)
}
