//! Where an allocation came from: a call stack captured cheaply when the
//! allocation happens (instruction pointers only, plus the foreign stack of
//! an embedding interpreter such as Python) and turned into file, line and
//! function only when someone asks.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock};

use smallvec::SmallVec;

/// One resolved frame of a call stack, innermost first in a stack.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Frame {
    /// The function (demangled, without the hash suffix).
    pub function: String,
    /// The source file, when debug information or the interpreter knows it.
    pub file: Option<String>,
    /// The line in `file`.
    pub line: Option<u32>,
}

impl fmt::Display for Frame {
    /// `src/main.rs:12 in app::load`, or the function alone when its place
    /// is unknown.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (&self.file, self.line) {
            (Some(file), Some(line)) => write!(f, "{file}:{line} in {}", self.function),
            (Some(file), None) => write!(f, "{file} in {}", self.function),
            _ => f.write_str(&self.function),
        }
    }
}

/// Captures the stack of an embedding interpreter's current thread
/// (innermost frame first), or `None` when the thread is not running
/// interpreted code.
pub type ForeignStackCapture = fn() -> Option<Vec<Frame>>;

static FOREIGN_CAPTURE: OnceLock<ForeignStackCapture> = OnceLock::new();

/// Installs the capture of an embedding interpreter's stack (the Python
/// package installs one for Python frames). The first installation wins;
/// later ones are ignored and return `false`.
///
/// ```
/// fn no_interpreter() -> Option<Vec<devmm::callsite::Frame>> { None }
/// let _first = devmm::callsite::set_foreign_stack_capture(no_interpreter);
/// ```
pub fn set_foreign_stack_capture(capture: ForeignStackCapture) -> bool {
    FOREIGN_CAPTURE.set(capture).is_ok()
}

/// Function-name prefixes of frames that are devmm's own machinery (the
/// allocation path, the unwinder, the standard library around them, the
/// Python bindings' glue): the first frame past them is the call site.
const INTERNAL_PREFIXES: &[&str] = &[
    "backtrace::",
    "devmm::",
    "_devmm::",
    "pyo3::",
    "core::",
    "alloc::",
    "std::",
    "<devmm::",
    "<_devmm::",
    "<pyo3::",
    "<core::",
    "<alloc::",
    "<std::",
    "<&",
    "<F as",
];

/// The C runtime's frames below `main`.
const STARTUP_FUNCTIONS: &[&str] = &[
    "main",
    "_start",
    "__libc_start_main",
    "__libc_start_call_main",
    "__libc_start_main_impl",
];

fn is_internal(frame: &Frame) -> bool {
    INTERNAL_PREFIXES
        .iter()
        .any(|prefix| frame.function.starts_with(prefix))
        || frame.function.starts_with("__rust")
        || STARTUP_FUNCTIONS.contains(&frame.function.as_str())
}

/// A call stack captured at an allocation: the raw native frames and, for
/// calls from an interpreter, its stack. Resolving symbols is left to
/// [`frames`](Self::frames), which caches each address once resolved.
///
/// ```
/// use devmm::callsite::CallSite;
/// fn allocate_here() -> CallSite { CallSite::capture(32) }
/// let site = allocate_here();
/// // With debug information, the innermost user frame is this file.
/// if let Some(frame) = site.frames().first() {
///     assert!(frame.function.contains("allocate_here") || frame.file.is_some());
/// }
/// ```
#[derive(Clone)]
pub struct CallSite {
    /// Instruction pointers, innermost first (return addresses past the
    /// first): a `backtrace::Frame` clone would look each frame's function
    /// up in the unwind tables a second time.
    native: Arc<[usize]>,
    foreign: Option<Arc<[Frame]>>,
}

impl fmt::Debug for CallSite {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CallSite")
            .field("native_frames", &self.native.len())
            .field("foreign_frames", &self.foreign.as_ref().map(|s| s.len()))
            .finish()
    }
}

impl CallSite {
    /// Captures the interpreter's stack when the calling thread is running
    /// interpreted code (a capture is installed), else at most `depth`
    /// native frames. Costs an unwind, not a symbol lookup.
    pub fn capture(depth: usize) -> CallSite {
        // An interpreter's stack names the user's code; the native frames
        // under it are the bindings' glue, so they are not unwound at all.
        if let Some(frames) = FOREIGN_CAPTURE.get().and_then(|capture| capture()) {
            return CallSite {
                native: Arc::from(Vec::new()),
                foreign: Some(frames.into()),
            };
        }
        let mut native: SmallVec<[usize; 32]> = SmallVec::new();
        if depth > 0 {
            let push = |native: &mut SmallVec<[usize; 32]>, ip: usize| {
                native.push(ip);
                native.len() < depth
            };
            // The cached unwinder where there is one, else libgcc's, which
            // also walks what the cached one could not finish, from the start.
            if crate::stackwalk::trace(|ip| push(&mut native, ip)) != crate::stackwalk::Walk::Done {
                native.clear();
                backtrace::trace(|frame| push(&mut native, frame.ip() as usize));
            }
        }
        CallSite {
            native: Arc::from(&native[..]),
            foreign: None,
        }
    }

    /// A call site with no frames, for allocations whose stack was not
    /// captured (depth 0) or is unknown (a trace without call sites).
    pub fn unknown() -> CallSite {
        CallSite {
            native: Arc::from(Vec::new()),
            foreign: None,
        }
    }

    /// A call site made of frames already resolved (read from a trace).
    pub fn from_frames(frames: Vec<Frame>) -> CallSite {
        CallSite {
            native: Arc::from(Vec::new()),
            foreign: Some(frames.into()),
        }
    }

    /// The stack as the caller sees it, innermost first: the interpreter's
    /// frames when there are any (they name the user's code), else the
    /// native frames less devmm's own allocation path and the standard
    /// library's plumbing. Resolves symbols on first use of each address.
    pub fn frames(&self) -> Vec<Frame> {
        if let Some(foreign) = self.foreign.as_ref().filter(|f| !f.is_empty()) {
            return foreign.to_vec();
        }
        self.native
            .iter()
            .flat_map(|&ip| resolve(ip).iter().cloned().collect::<Vec<_>>())
            .filter(|frame| !is_internal(frame))
            .collect()
    }

    /// The innermost frame of [`frames`](Self::frames): the allocation's
    /// call site, by which reports group.
    pub fn top(&self) -> Option<Frame> {
        self.frames().into_iter().next()
    }
}

/// Resolved frames by instruction address: reports resolve the same few
/// call sites over and over, and a symbol lookup costs microseconds.
fn cache() -> &'static Mutex<HashMap<usize, Arc<[Frame]>>> {
    static CACHE: OnceLock<Mutex<HashMap<usize, Arc<[Frame]>>>> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

fn resolve(ip: usize) -> Arc<[Frame]> {
    if let Some(hit) = cache().lock().unwrap_or_else(|e| e.into_inner()).get(&ip) {
        return Arc::clone(hit);
    }
    let mut resolved = Vec::new();
    // One address can stand for several inlined functions; the callback
    // runs once for each, innermost first.
    // `resolve` looks up `ip - 1`, as `resolve_frame` does: a return
    // address can be the first byte of the next line or function.
    backtrace::resolve(ip as *mut std::ffi::c_void, |symbol| {
        let Some(name) = symbol.name() else { return };
        resolved.push(Frame {
            function: format!("{name:#}"),
            file: symbol.filename().map(|p| p.display().to_string()),
            line: symbol.lineno(),
        });
    });
    let resolved: Arc<[Frame]> = resolved.into();
    cache()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(ip, Arc::clone(&resolved));
    resolved
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn depth_bounds_the_native_frames() {
        let site = CallSite::capture(3);
        assert_eq!(site.native.len(), 3);
        assert!(CallSite::capture(0).frames().is_empty());
    }

    #[test]
    fn frames_display_file_line_and_function() {
        let frame = Frame {
            function: "app::load".into(),
            file: Some("src/main.rs".into()),
            line: Some(12),
        };
        assert_eq!(frame.to_string(), "src/main.rs:12 in app::load");
    }
}
