use std::io::Write;
use std::sync::Mutex;
use std::time::SystemTime;

use crate::callsite::CallSite;
use crate::error::Result;
use crate::ptr::DevicePtr;
use crate::resource::{MemoryInfo, MemoryResource};
use crate::stream::Stream;
use crate::trace::{self, Action, TraceEvent, TraceFormat};

/// Writes every allocate, allocate failure and free through it to a file
/// (any `Write`) as it happens, in rmm's `logging_resource_adaptor` CSV or
/// as JSON lines with the device and, optionally, the call site.
///
/// Each event is one `write` of one whole line under a lock, so lines
/// from many threads never interleave and a crash loses at most the line
/// being written.
///
/// ```
/// use devmm::trace::{parse_trace, TraceFormat};
/// use devmm::{MallocMemoryResource, MemoryResource, Stream, TraceAdaptor};
/// let mr = TraceAdaptor::new(MallocMemoryResource::new(), Vec::new(), TraceFormat::Csv)?;
/// let s = Stream::cpu();
/// let p = mr.allocate(64, &s)?;
/// unsafe { mr.deallocate(p, 64, &s)? };
/// let text = String::from_utf8(mr.into_writer()).unwrap();
/// assert!(text.starts_with("Thread,Time,Action,Pointer,Size,Stream\n"));
/// assert_eq!(parse_trace(&text, "memory").unwrap().len(), 2);
/// # Ok::<(), devmm::Error>(())
/// ```
pub struct TraceAdaptor<U, W: Write = std::fs::File> {
    upstream: super::upstream::Upstream<U>,
    format: TraceFormat,
    call_site_depth: usize,
    out: Mutex<W>,
    probes: super::UpstreamProbes,
}

impl<U: std::fmt::Debug, W: Write> std::fmt::Debug for TraceAdaptor<U, W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "TraceAdaptor(format={:?}, upstream={:?})",
            self.format, self.upstream
        )
    }
}

impl<U: MemoryResource> TraceAdaptor<U, std::fs::File> {
    /// Traces to a new file at `path` (truncated if it exists).
    pub fn to_file(upstream: U, path: &std::path::Path, format: TraceFormat) -> Result<Self> {
        let file = std::fs::File::create(path).map_err(|e| {
            io_error(
                format!("cannot create the trace file {}", path.display()),
                &e,
            )
        })?;
        TraceAdaptor::new(upstream, file, format)
    }
}

/// The [`Error::Io`](crate::Error::Io) for `what`, which failed with `error`.
fn io_error(what: String, error: &std::io::Error) -> crate::Error {
    crate::Error::Io {
        what,
        reason: error.to_string(),
        errno: error.raw_os_error(),
    }
}

impl<U: MemoryResource, W: Write + Send> TraceAdaptor<U, W> {
    /// Traces to `out`, writing the format's header first.
    pub fn new(upstream: U, mut out: W, format: TraceFormat) -> Result<Self> {
        if let Some(header) = trace::header(format) {
            writeln!(out, "{header}")
                .and_then(|()| out.flush())
                .map_err(|e| io_error("cannot write the trace header".into(), &e))?;
        }
        Ok(TraceAdaptor {
            upstream: super::upstream::Upstream::new(upstream),
            format,
            call_site_depth: 0,
            out: Mutex::new(out),
            probes: super::UpstreamProbes::new(),
        })
    }

    /// Records the call site of every event, `depth` frames deep (JSON
    /// lines only; rmm's CSV has no column for it). Symbols are resolved
    /// as each line is written, once per address.
    pub fn with_call_sites(mut self, depth: usize) -> Self {
        self.call_site_depth = depth;
        self
    }

    /// The wrapped resource.
    pub fn get_upstream(&self) -> &U {
        &self.upstream
    }

    /// Flushes the writer.
    pub fn flush(&self) -> std::io::Result<()> {
        self.lock().flush()
    }

    /// Runs `f` on the writer under the adaptor's lock: to read an
    /// in-memory trace while the adaptor lives, or to flush a custom writer.
    pub fn with_writer<R>(&self, f: impl FnOnce(&mut W) -> R) -> R {
        f(&mut self.lock())
    }

    /// The writer, once the adaptor is no longer needed.
    pub fn into_writer(self) -> W {
        self.out.into_inner().unwrap_or_else(|e| e.into_inner())
    }

    /// The event, call site resolved, before any lock is taken; its time
    /// is set under the lock, so a trace's times never go back.
    fn event(&self, action: Action, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> TraceEvent {
        let frames = if self.format == TraceFormat::JsonLines && self.call_site_depth > 0 {
            CallSite::capture(self.call_site_depth).frames()
        } else {
            Vec::new()
        };
        TraceEvent {
            line: 0,
            thread: trace::current_thread_id(),
            time_ns: 0,
            action,
            ptr: ptr.addr(),
            nbytes,
            stream: stream.handle(),
            device: Some(self.upstream.device()),
            frames,
        }
    }

    fn write(&self, out: &mut W, mut event: TraceEvent) {
        event.time_ns = trace::epoch_ns(SystemTime::now());
        let line = trace::format_event(self.format, &event);
        // A trace that cannot be written must not fail the call it
        // describes; the error surfaces on `flush`.
        let _ = out.write_all(line.as_bytes()).and_then(|()| out.flush());
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, W> {
        self.out.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl<U: MemoryResource, W: Write + Send> MemoryResource for TraceAdaptor<U, W> {
    fn allocate(&self, nbytes: usize, stream: &Stream) -> Result<DevicePtr> {
        let result = self
            .upstream
            .allocate(nbytes, stream)
            .map_err(|e| e.through("TraceAdaptor"));
        let event = match &result {
            Ok(ptr) => self.event(Action::Allocate, *ptr, nbytes, stream),
            Err(_) => self.event(Action::AllocateFailure, DevicePtr::NULL, nbytes, stream),
        };
        self.write(&mut self.lock(), event);
        result
    }

    unsafe fn deallocate(&self, ptr: DevicePtr, nbytes: usize, stream: &Stream) -> Result<()> {
        let event = self.event(Action::Free, ptr, nbytes, stream);
        // The lock is held across the free: once the upstream has the
        // address back another thread may get it again, and its `allocate`
        // line must come after this `free` line. Written only when the free
        // succeeds, so a refused free leaves no line replay would trip on.
        let mut out = self.lock();
        // SAFETY: forwarded verbatim; the caller upholds the contract.
        unsafe { self.upstream.deallocate(ptr, nbytes, stream)? };
        self.write(&mut out, event);
        Ok(())
    }

    forward_probes!(upstream: U, probes);

    fn available_memory(&self) -> Result<MemoryInfo> {
        self.upstream.available_memory()
    }
}
