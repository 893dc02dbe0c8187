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

// Public C API of every CPython the package supports, though not in the
// limited API pyo3's abi3 build binds; the interpreter exports it.
extern "C" {
    fn PyGILState_Check() -> std::os::raw::c_int;
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
    if holds_gil() {
        return Python::try_attach(f);
    }
    // SAFETY: Py_IsInitialized may be called at any time, without the GIL.
    if unsafe { ffi::Py_IsInitialized() } == 0 {
        return None;
    }
    // SAFETY: the interpreter is initialised, and the state is released
    // below, on this thread, after `f`.
    let state = unsafe { ffi::PyGILState_Ensure() };
    let result = Python::try_attach(f);
    // SAFETY: `state` came from the matching PyGILState_Ensure above.
    unsafe { ffi::PyGILState_Release(state) };
    result
}
