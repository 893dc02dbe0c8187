//! Attaching to the interpreter from code the core or a consumer calls.
//!
//! PyO3 counts, per thread, the frames it entered with the GIL, and
//! `Python::attach` trusts that count. C code between such a frame and a
//! callback into us may release the GIL without PyO3 knowing: PyTorch
//! runs a DLPack deleter so, inside the deallocation of a devmm tensor
//! that imported its view. The count then says "attached" while the
//! thread is not, and touching a Python object crashes. Every path the
//! core or a consumer may call into (deleters, resources, loggers,
//! streams, the registry's scope) attaches through [`attach`], which asks
//! the interpreter itself.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};
use pyo3::BoundObject;

// Public C API of every CPython the package supports, though not in the
// limited API pyo3's abi3 build binds; the interpreter exports it.
extern "C" {
    fn PyGILState_Check() -> std::os::raw::c_int;
}

// The same function pyo3's `ffi` binds, declared here as able to unwind:
// CPython before 3.14 ends a thread that asks for the GIL while the
// interpreter finalises with `pthread_exit`, whose forced unwind leaves
// through this call. Declared `"C"`, the call is taken never to unwind,
// so the frames around it keep no cleanup for the unwind to run, and the
// guard in `attach` would never stop it.
extern "C-unwind" {
    #[link_name = "PyGILState_Ensure"]
    fn gil_state_ensure() -> ffi::PyGILState_STATE;
    // Likewise: Python code the call runs may release the GIL and be ended
    // when it asks again.
    #[link_name = "PyObject_Call"]
    fn object_call(
        callable: *mut ffi::PyObject,
        args: *mut ffi::PyObject,
        kwargs: *mut ffi::PyObject,
    ) -> *mut ffi::PyObject;
}

thread_local! {
    /// Set while the thread runs code a framework calls with a lock of its
    /// own held ([`under_framework_lock`]).
    static UNDER_FRAMEWORK_LOCK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Runs `f` with the thread marked as holding a framework's lock: PyTorch's
/// caching allocator calls a `torch.cuda.MemPool`'s entry points with its
/// mutex held, and a thread holding the GIL may wait for that mutex (to
/// free a tensor), so code `f` runs must not wait for the GIL
/// ([`may_wait_for_gil`]); the frees after an error, the logging of it
/// included, are `f`'s.
pub(crate) fn under_framework_lock<R>(f: impl FnOnce() -> R) -> R {
    struct Unmark(bool);
    impl Drop for Unmark {
        fn drop(&mut self) {
            UNDER_FRAMEWORK_LOCK.set(self.0);
        }
    }
    let _unmark = Unmark(UNDER_FRAMEWORK_LOCK.replace(true));
    f()
}

/// Whether the calling thread may run Python code that may wait for the
/// GIL: not while it holds a framework's lock ([`under_framework_lock`]),
/// even holding the GIL, which Python code hands over (every switch
/// interval, around I/O) to a thread that may then wait for that lock.
pub(crate) fn may_wait_for_gil() -> bool {
    !UNDER_FRAMEWORK_LOCK.get()
}

/// Whether the calling thread holds the GIL, as the interpreter says
/// (not PyO3's count of its own frames).
pub(crate) fn holds_gil() -> bool {
    // SAFETY: PyGILState_Check takes no arguments and only reads the
    // calling thread's state; it is safe to call from any thread.
    unsafe { PyGILState_Check() != 0 }
}

/// Runs `f` attached to the interpreter, taking the GIL where the thread
/// does not hold it, whatever PyO3's count says; `None` once the
/// interpreter is finalised (there is nothing to attach to).
pub(crate) fn attach<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    // PyO3's PyGILState_Ensure blocks the thread, rather than let it be
    // ended, once the interpreter is finalising; but Python code `f` runs
    // may release the GIL and be ended when it asks again: the guard stops
    // that unwind before it reaches a frame that would catch it.
    let guard = HangOnForcedUnwind;
    let result = attached(f);
    std::mem::forget(guard);
    result
}

fn attached<R>(f: impl for<'py> FnOnce(Python<'py>) -> R) -> Option<R> {
    if holds_gil() {
        return Python::try_attach(innermost(f));
    }
    if !initialized() {
        return None;
    }
    // SAFETY: the interpreter is initialised, and the state is released
    // below, on this thread, after `f`.
    let state = unsafe { gil_state_ensure() };
    if !initialized() {
        // Finalisation began while this thread waited for the GIL (the
        // finalising thread releases it around driver calls): its objects
        // are being torn down, so no Python code may run here any more.
        // The GIL goes back first, or finalisation could never end.
        // SAFETY: `state` came from the matching PyGILState_Ensure above.
        unsafe { ffi::PyGILState_Release(state) };
        hang();
    }
    let result = Python::try_attach(innermost(f));
    // SAFETY: `state` came from the matching PyGILState_Ensure above.
    unsafe { ffi::PyGILState_Release(state) };
    result
}

/// `f` with the guard in its own frame, inside PyO3's attach: a forced
/// unwind out of `f`'s Python code must stop before PyO3's guard releases
/// the thread state it no longer holds while unwinding (a fatal error:
/// "PyGILState_Release: thread state ... must be current when releasing").
fn innermost<R>(
    f: impl for<'py> FnOnce(Python<'py>) -> R,
) -> impl for<'py> FnOnce(Python<'py>) -> R {
    move |py| {
        let guard = HangOnForcedUnwind;
        let result = f(py);
        std::mem::forget(guard);
        result
    }
}

/// `callable(*args, **kwargs)`: how code reached through [`attach`] runs
/// Python code it was given (a resource's methods, a hook, a stream's
/// methods, a logger). The guards in [`attach`] sit outside such code's
/// frames, and PyO3's own calls keep the argument tuple in a frame of
/// theirs: a forced unwind out of the call (see `gil_state_ensure`) ran
/// that tuple's release on a thread without the GIL while the interpreter
/// tore its objects down, and crashed. Here the guard is the frame's last
/// value, so the unwind stops at it before any object is let go. (A
/// method is its attribute, looked up first: `call(&obj.getattr(name)?, ..)`.)
pub(crate) fn call<'py, A>(
    callable: &Bound<'py, PyAny>,
    args: A,
    kwargs: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyAny>>
where
    A: IntoPyObject<'py, Target = PyTuple>,
    A::Error: Into<PyErr>,
{
    let py = callable.py();
    let args = args.into_pyobject(py).map_err(Into::into)?.into_bound();
    let kwargs = kwargs.map_or(std::ptr::null_mut(), |kwargs| kwargs.as_ptr());
    let guard = HangOnForcedUnwind;
    // SAFETY: the GIL is held (`py`); `callable`, `args` and `kwargs`
    // (or null) are live objects this frame and its caller hold.
    let result = unsafe { object_call(callable.as_ptr(), args.as_ptr(), kwargs) };
    std::mem::forget(guard);
    // SAFETY: PyObject_Call returns a new reference, or null with an
    // exception set.
    unsafe { Bound::from_owned_ptr_or_err(py, result) }
}

/// Runs `f` detached from the interpreter (the GIL released), as
/// `Python::detach` does, except that a thread finding the interpreter
/// finalising when it would attach again blocks for good instead of
/// being ended. CPython before 3.14 ends such a thread with
/// `pthread_exit`, whose forced unwind the catch frame of PyO3's
/// trampoline below us turns into an abort ("FATAL: exception not
/// rethrown"); the process is exiting, so a parked thread costs nothing.
/// PyO3 0.27 does the same for `PyGILState_Ensure` but not for
/// re-attaching after `detach` (ADR 0019).
pub(crate) fn detach<T, F>(py: Python<'_>, f: F) -> T
where
    F: Send + FnOnce() -> T,
    T: Send,
{
    // Covers the window between the check below and PyO3 re-attaching, and
    // a callback's Python code ended inside `f` the same way.
    let guard = HangOnForcedUnwind;
    // The thread finalising the interpreter (a finaliser freeing a buffer
    // at exit) may attach again, and must, or the process never exits.
    let finalizing = !initialized();
    let result = py.detach(|| {
        let result = f();
        if !finalizing && !initialized() {
            hang();
        }
        result
    });
    std::mem::forget(guard);
    result
}

/// Whether the interpreter is initialised and not finalising.
fn initialized() -> bool {
    // SAFETY: Py_IsInitialized may be called at any time, without the GIL.
    // CPython clears it in the same step that marks finalisation, and
    // `Py_IsFinalizing` is not in the stable ABI before 3.13.
    unsafe { ffi::Py_IsInitialized() != 0 }
}

fn hang() -> ! {
    loop {
        std::thread::park();
    }
}

/// Dropped only when a frame it lives in is unwound: by a Rust panic, which
/// it lets through, or by the forced unwind of `pthread_exit`, which it
/// stops by blocking the thread before the unwind reaches a frame that
/// would catch it.
struct HangOnForcedUnwind;

impl Drop for HangOnForcedUnwind {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            hang();
        }
    }
}

/// A handle to memory (a tensor, a buffer) that a Python object owns,
/// dropped, when the object goes, without the GIL where its release may
/// wait for the device (`DeviceBuffer::release_may_wait`: a synchronous
/// `cudaFree`, an import's wait for its stream before the producer's
/// deleter, a stream-ordered free that cannot be queued from this
/// thread): the work it waits for may need the GIL (a host callback, the
/// thread that lets that work run), as an explicit `free()`, which waits
/// detached, already allows for. Which handle is the last can change
/// under a check (an export released on another thread), so every such
/// handle is dropped detached; a release that only queues, and host
/// memory, which has nothing queued, keep the GIL.
pub(crate) struct DetachedDrop<T: HoldsMemory>(std::mem::ManuallyDrop<T>);

/// What [`DetachedDrop`] asks of a handle.
pub(crate) trait HoldsMemory: Send {
    /// Whether releasing the memory may wait for the device.
    fn release_may_wait(&self) -> bool;
}

impl HoldsMemory for devmm::Tensor {
    fn release_may_wait(&self) -> bool {
        self.buffer().release_may_wait()
    }
}

impl HoldsMemory for std::sync::Arc<devmm::DeviceBuffer> {
    fn release_may_wait(&self) -> bool {
        devmm::DeviceBuffer::release_may_wait(self)
    }
}

impl<T: HoldsMemory> From<T> for DetachedDrop<T> {
    fn from(handle: T) -> Self {
        DetachedDrop(std::mem::ManuallyDrop::new(handle))
    }
}

impl<T: HoldsMemory> std::ops::Deref for DetachedDrop<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T: HoldsMemory> Drop for DetachedDrop<T> {
    fn drop(&mut self) {
        // SAFETY: taken once, here, and never used again: the wrapper is
        // being dropped.
        let handle = unsafe { std::mem::ManuallyDrop::take(&mut self.0) };
        // Kept: nothing to wait for; no GIL to let go (a drop on a thread
        // without it); or the interpreter finalising, when no other thread
        // can take the GIL and a Python resource's free still needs it held.
        if !handle.release_may_wait() || !holds_gil() || !initialized() {
            drop(handle);
            return;
        }
        let mut handle = Some(handle);
        attach(|py| {
            let handle = handle.take();
            detach(py, move || drop(handle));
        });
        // Still here only when there was no interpreter to attach to.
        drop(handle);
    }
}
