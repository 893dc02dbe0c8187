//! How devmm errors surface in Python: each variant becomes the exception
//! the seed names, and an exception raised by Python code devmm called back
//! (a Python-defined resource) comes back out unchanged.

use std::cell::RefCell;

use pyo3::exceptions::{PyBufferError, PyImportError, PyMemoryError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    devmm,
    RuntimeUnavailableError,
    PyImportError,
    "A runtime (CUDA, ROCm) or the library a resource wraps is not available on this machine."
);

thread_local! {
    /// The exception a Python callback raised, with the message of the
    /// devmm error that carried it through Rust. Kept per thread: the
    /// callback and the binding that converts the error run on one thread.
    static PENDING: RefCell<Option<(String, PyErr)>> = const { RefCell::new(None) };

    /// A `KeyboardInterrupt` (or another exception that is not an
    /// `Exception`) raised by Python code devmm called where it could not
    /// be raised (a logging handler): the binding that made the call
    /// raises it instead of the call's result.
    static INTERRUPT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Keeps `err` for the binding that is calling into devmm on this thread,
/// when it is an interrupt the program must see (not an `Exception`);
/// returns it back otherwise, for the caller to report as unraisable.
pub(crate) fn defer_interrupt(py: Python<'_>, err: PyErr) -> Option<PyErr> {
    if err.is_instance_of::<pyo3::exceptions::PyException>(py) {
        return Some(err);
    }
    let stale = INTERRUPT.replace(Some(err));
    drop(stale);
    None
}

/// The interrupt [`defer_interrupt`] kept, if any.
pub(crate) fn take_deferred_interrupt() -> Option<PyErr> {
    INTERRUPT.take()
}

/// Remembers `err`, raised by Python code inside a devmm call, so that the
/// devmm error built from it (whose message is `message`) converts back to
/// the original exception at the binding boundary.
pub(crate) fn stash_python_error(message: String, err: PyErr) {
    // Replaced, then dropped outside the borrow: dropping an exception can
    // run Python code that reaches this stash again.
    let stale = PENDING.replace(Some((message, err)));
    drop(stale);
}

/// Runs `f`, whose devmm errors are logged rather than raised, and drops any
/// Python exception it stashed: no binding will convert that error, and a
/// stale stash would keep the exception (and its traceback's frames) alive.
/// An exception stashed before `f` ran is kept for its own conversion.
pub(crate) fn discarding_python_errors<T>(f: impl FnOnce() -> T) -> T {
    let outer = PENDING.take();
    let result = f();
    // Dropped outside the thread-local's borrow, as in `stash_python_error`.
    let unraised = PENDING.replace(outer);
    drop(unraised);
    result
}

/// Converts a devmm error to the Python exception users expect:
/// out-of-memory, limits and NULL allocations → `MemoryError`, bad values → `ValueError`,
/// missing runtimes → [`RuntimeUnavailableError`] (an `ImportError`),
/// DLPack refusals → `BufferError`, driver failures → `RuntimeError`.
/// A stream error is a stream (or stream value) that does not fit the
/// call, so a bad argument: `ValueError`.
pub(crate) fn to_py_err(err: devmm::Error) -> PyErr {
    if let Some(interrupt) = take_deferred_interrupt() {
        return interrupt;
    }
    let message = err.to_string();
    if let devmm::Error::FreeFailed { source, .. } = err {
        // The cause's own exception (a callback's, unchanged), with a note
        // that the buffer is still live and free() may be retried.
        let cause = to_py_err(*source);
        Python::attach(|py| {
            let _ = cause.value(py).call_method1("add_note", (message,));
        });
        return cause;
    }
    // Taken out first: a stale exception is dropped after the borrow ends.
    let stashed = match PENDING.take() {
        Some((carried, original)) if message.contains(&carried) => Some(original),
        _ => None,
    };
    if let Some(original) = stashed {
        return original;
    }
    match err {
        // A resource that returned NULL for a non-empty request: the
        // C convention for "no memory", so the Python one for it too.
        devmm::Error::OutOfMemory { .. }
        | devmm::Error::LimitExceeded { .. }
        | devmm::Error::Misuse {
            kind: devmm::MisuseKind::NullAllocation,
            ..
        } => PyMemoryError::new_err(message),
        devmm::Error::InvalidLayout { .. }
        | devmm::Error::Parse { .. }
        | devmm::Error::InvalidArgument { .. }
        | devmm::Error::Misuse { .. }
        | devmm::Error::Stream { .. }
        | devmm::Error::NotDereferenceable { .. }
        | devmm::Error::BufferClosed { .. } => PyValueError::new_err(message),
        devmm::Error::RuntimeUnavailable { .. } => RuntimeUnavailableError::new_err(message),
        devmm::Error::Dlpack { .. } => PyBufferError::new_err(message),
        _ => PyRuntimeError::new_err(message),
    }
}

/// `Result<T, devmm::Error>` → `PyResult<T>`.
pub(crate) trait IntoPyResult<T> {
    /// Converts the error with [`to_py_err`].
    fn py(self) -> PyResult<T>;
}

impl<T> IntoPyResult<T> for devmm::Result<T> {
    /// An interrupt deferred during the call wins over its result: a value
    /// the caller would have received is dropped (a buffer is freed).
    fn py(self) -> PyResult<T> {
        let value = self.map_err(to_py_err)?;
        match take_deferred_interrupt() {
            Some(interrupt) => Err(interrupt),
            None => Ok(value),
        }
    }
}
