//! Stream capture (CUDA graphs, HIP graphs), with the rules of the CUDA programming guide's
//! "Stream Capture" section that devmm can run into:
//!
//! - work queued on a capturing stream is not run: it becomes a node of the capture's graph;
//!   an event recorded there is a *captured* event, which stands for those nodes;
//! - a stream outside the capture that waits on a captured event joins the capture (its later
//!   work is captured too), and must be joined back into the origin stream before
//!   `*StreamEndCapture`, which otherwise fails with `StreamCaptureUnjoined`;
//! - a capturing stream that waits on an event recorded outside the capture creates a
//!   dependency across the capture boundary: refused (`StreamCaptureIsolation`) unless the
//!   wait says `*EventWaitExternal`, which is itself invalid outside a capture;
//! - synchronizing a capturing stream, synchronizing the device while any capture is active,
//!   and, under the capture mode's rules, the "potentially unsafe" synchronous calls
//!   (`*Malloc`, the pinned and managed allocators, `*Free`, `*FreeHost`, `*Memcpy`) fail with
//!   `StreamCaptureUnsupported`; using the legacy stream while a blocking stream of its device
//!   is capturing fails with `StreamCaptureImplicit`;
//! - a stream-ordered allocation on a capturing stream is an allocation node of the capture's
//!   graph (device memory only: a pool of pinned host memory refuses), and a stream-ordered
//!   free there is a free node, which may free only what an allocation node returned, of
//!   this graph or another (`cudaGraphAddMemFreeNode`: "an address that was not returned by
//!   an allocation node" is invalid); the block is then the graph's;
//! - a failure of these invalidates the capture: its streams' later use fails with
//!   `StreamCaptureInvalidated`, and `*StreamEndCapture` ends it with that error and no graph.

use std::collections::HashMap;
use std::ffi::c_int;
use std::thread::ThreadId;

use crate::platform::Fault;

/// Which stream a handle resolved to: created streams by handle, the per-thread stream by
/// thread and device, the legacy stream by device.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum StreamKey {
    Created(usize),
    PerThread(ThreadId, c_int),
    Legacy(c_int),
}

/// `cudaStreamCaptureMode` / `hipStreamCaptureMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Global,
    ThreadLocal,
    Relaxed,
}

impl Mode {
    pub(crate) fn from_raw(mode: c_int) -> Result<Mode, Fault> {
        match mode {
            0 => Ok(Mode::Global),
            1 => Ok(Mode::ThreadLocal),
            2 => Ok(Mode::Relaxed),
            _ => Err(Fault::InvalidValue),
        }
    }
}

/// `cudaStreamCaptureStatus` / `hipStreamCaptureStatus`.
pub(crate) const STATUS_NONE: c_int = 0;
pub(crate) const STATUS_ACTIVE: c_int = 1;
pub(crate) const STATUS_INVALIDATED: c_int = 2;

/// Why a call broke a capture's rules (the platforms' codes 900 to 908).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureFault {
    /// 900: the operation is not permitted while a stream is capturing.
    Unsupported,
    /// 901: the capture was invalidated by an earlier error.
    Invalidated,
    /// 902: two independent captures would be merged.
    Merge,
    /// 903: the capture was not begun on this stream.
    Unmatched,
    /// 904: a stream that joined the capture was not joined back into the origin stream.
    Unjoined,
    /// 905: a dependency would cross the capture boundary.
    Isolation,
    /// 906: the legacy stream would depend on a capturing blocking stream.
    Implicit,
    /// 908: a global or thread-local capture was ended on another thread.
    WrongThread,
}

impl CaptureFault {
    /// The status code both platforms give it.
    pub fn code(self) -> c_int {
        match self {
            CaptureFault::Unsupported => 900,
            CaptureFault::Invalidated => 901,
            CaptureFault::Merge => 902,
            CaptureFault::Unmatched => 903,
            CaptureFault::Unjoined => 904,
            CaptureFault::Isolation => 905,
            CaptureFault::Implicit => 906,
            CaptureFault::WrongThread => 908,
        }
    }
}

/// A stream that joined a capture by waiting on one of its events.
#[derive(Debug, Default)]
struct Joined {
    /// Work captured on it so far.
    work: u64,
    /// Whether a stream of the capture waited on an event recorded after its last work.
    rejoined: bool,
}

#[derive(Debug)]
pub(crate) struct Capture {
    origin: StreamKey,
    device: c_int,
    mode: Mode,
    thread: ThreadId,
    invalidated: bool,
    /// Work captured on the origin stream so far.
    work: u64,
    joined: HashMap<StreamKey, Joined>,
}

/// What an event recorded on a capturing stream stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CapturedEvent {
    capture: u64,
    stream: StreamKey,
    /// The stream's captured work when it was recorded.
    work: u64,
}

/// The active captures.
#[derive(Debug, Default)]
pub(crate) struct Captures {
    next: u64,
    active: HashMap<u64, Capture>,
    by_stream: HashMap<StreamKey, u64>,
}

impl Captures {
    /// `*StreamBeginCapture` on `key`, a stream of `device`.
    pub(crate) fn begin(&mut self, key: StreamKey, device: c_int, mode: Mode) -> Result<(), Fault> {
        if matches!(key, StreamKey::Legacy(_)) || self.by_stream.contains_key(&key) {
            return Err(Fault::Capture(CaptureFault::Unsupported));
        }
        self.next += 1;
        self.active.insert(
            self.next,
            Capture {
                origin: key,
                device,
                mode,
                thread: std::thread::current().id(),
                invalidated: false,
                work: 0,
                joined: HashMap::new(),
            },
        );
        self.by_stream.insert(key, self.next);
        Ok(())
    }

    /// `*StreamEndCapture` on `key`: the capture's streams leave it; `Ok` when it makes a graph.
    pub(crate) fn end(&mut self, key: StreamKey) -> Result<(), Fault> {
        let Some(&id) = self.by_stream.get(&key) else {
            return Err(Fault::InvalidValue);
        };
        let capture = &self.active[&id];
        if capture.origin != key {
            return Err(Fault::Capture(CaptureFault::Unmatched));
        }
        if capture.mode != Mode::Relaxed && capture.thread != std::thread::current().id() {
            return Err(Fault::Capture(CaptureFault::WrongThread));
        }
        let capture = self.active.remove(&id).ok_or(Fault::InvalidValue)?;
        self.by_stream.retain(|_, c| *c != id);
        if capture.invalidated {
            Err(Fault::Capture(CaptureFault::Invalidated))
        } else if capture.joined.values().any(|j| !j.rejoined) {
            Err(Fault::Capture(CaptureFault::Unjoined))
        } else {
            Ok(())
        }
    }

    /// `*StreamIsCapturing`: the status of `key`.
    pub(crate) fn status(&self, key: StreamKey) -> c_int {
        match self
            .by_stream
            .get(&key)
            .map(|id| self.active[id].invalidated)
        {
            None => STATUS_NONE,
            Some(false) => STATUS_ACTIVE,
            Some(true) => STATUS_INVALIDATED,
        }
    }

    /// The id of the capture `key` belongs to (`*StreamGetCaptureInfo`'s `id_out`), if any.
    pub(crate) fn id(&self, key: StreamKey) -> Option<u64> {
        self.by_stream.get(&key).copied()
    }

    /// Whether work submitted to `key` is captured instead of run; an invalidated capture's
    /// streams refuse work.
    pub(crate) fn capture_work(&mut self, key: StreamKey) -> Result<bool, Fault> {
        let Some(&id) = self.by_stream.get(&key) else {
            return Ok(false);
        };
        let capture = self.active.get_mut(&id).ok_or(Fault::InvalidValue)?;
        if capture.invalidated {
            return Err(Fault::Capture(CaptureFault::Invalidated));
        }
        if capture.origin == key {
            capture.work += 1;
        } else if let Some(joined) = capture.joined.get_mut(&key) {
            joined.work += 1;
            joined.rejoined = false;
        }
        Ok(true)
    }

    /// The captured event a record on `key` makes, after its work was captured.
    pub(crate) fn record(&self, key: StreamKey) -> Option<CapturedEvent> {
        let &id = self.by_stream.get(&key)?;
        let capture = &self.active[&id];
        let work = match capture.joined.get(&key) {
            Some(joined) => joined.work,
            None => capture.work,
        };
        Some(CapturedEvent {
            capture: id,
            stream: key,
            work,
        })
    }

    /// `*StreamWaitEvent` of `key` on an event: `captured` when it was recorded in a capture,
    /// `external` when the wait has the external flag. `Ok(true)` when the wait is captured
    /// (a graph node) instead of run.
    pub(crate) fn wait(
        &mut self,
        key: StreamKey,
        captured: Option<CapturedEvent>,
        external: bool,
    ) -> Result<bool, Fault> {
        let waiting = self.by_stream.get(&key).copied();
        match (waiting, captured) {
            (None, None) if external => Err(Fault::InvalidValue),
            (None, None) => Ok(false),
            (None, Some(event)) => {
                // Joins the capture the event belongs to (if it is still active).
                let Some(capture) = self.active.get_mut(&event.capture) else {
                    return Ok(false);
                };
                if capture.invalidated {
                    // There is no capture left to join (CUDA answers an invalid value).
                    return Err(Fault::InvalidValue);
                }
                capture.joined.insert(key, Joined::default());
                self.by_stream.insert(key, event.capture);
                Ok(true)
            }
            (Some(id), None) => {
                if external {
                    self.capture_work(key)?;
                    Ok(true)
                } else {
                    self.invalidate(id);
                    Err(Fault::Capture(CaptureFault::Isolation))
                }
            }
            (Some(id), Some(event)) if event.capture != id => {
                self.invalidate(id);
                self.invalidate(event.capture);
                Err(Fault::Capture(CaptureFault::Merge))
            }
            (Some(id), Some(event)) => {
                self.capture_work(key)?;
                let capture = self.active.get_mut(&id).ok_or(Fault::InvalidValue)?;
                if let Some(joined) = capture.joined.get_mut(&event.stream) {
                    if joined.work == event.work && event.stream != key {
                        joined.rejoined = true;
                    }
                }
                Ok(true)
            }
        }
    }

    /// Fails a call with `fault`, invalidating the capture `key` belongs to.
    pub(crate) fn refuse_on(&mut self, key: StreamKey, fault: CaptureFault) -> Fault {
        if let Some(&id) = self.by_stream.get(&key) {
            self.invalidate(id);
        }
        Fault::Capture(fault)
    }

    /// A "potentially unsafe" call (a synchronous allocation or free, a synchronous copy) on
    /// the calling thread: refused, invalidating the captures that forbid it, when the thread
    /// has a capture not begun in relaxed mode or another thread has a global one.
    pub(crate) fn check_unsafe_call(&mut self) -> Result<(), Fault> {
        let me = std::thread::current().id();
        let forbidding: Vec<u64> = self
            .active
            .iter()
            .filter(|(_, c)| {
                (c.thread == me && c.mode != Mode::Relaxed)
                    || (c.thread != me && c.mode == Mode::Global)
            })
            .map(|(&id, _)| id)
            .collect();
        if forbidding.is_empty() {
            return Ok(());
        }
        forbidding.into_iter().for_each(|id| self.invalidate(id));
        Err(Fault::Capture(CaptureFault::Unsupported))
    }

    /// Synchronizing `device`: refused while any of its streams captures.
    pub(crate) fn check_device_synchronize(&mut self, device: c_int) -> Result<(), Fault> {
        let capturing: Vec<u64> = self
            .active
            .iter()
            .filter(|(_, c)| c.device == device)
            .map(|(&id, _)| id)
            .collect();
        if capturing.is_empty() {
            return Ok(());
        }
        capturing.into_iter().for_each(|id| self.invalidate(id));
        Err(Fault::Capture(CaptureFault::Unsupported))
    }

    /// Using `device`'s legacy stream: refused while a stream of the device that synchronizes
    /// with it (`blocking`) captures, which invalidates that capture when `invalidates`.
    pub(crate) fn check_legacy_use(
        &mut self,
        device: c_int,
        blocking: impl Fn(StreamKey) -> bool,
        invalidates: bool,
    ) -> Result<(), Fault> {
        let capturing: Vec<u64> = self
            .by_stream
            .iter()
            .filter(|(key, id)| self.active[id].device == device && blocking(**key))
            .map(|(_, &id)| id)
            .collect();
        if capturing.is_empty() {
            return Ok(());
        }
        if invalidates {
            capturing.into_iter().for_each(|id| self.invalidate(id));
        }
        Err(Fault::Capture(CaptureFault::Implicit))
    }

    fn invalidate(&mut self, id: u64) {
        if let Some(capture) = self.active.get_mut(&id) {
            capture.invalidated = true;
        }
    }
}
