//! Recovering from running out, for Python: `FailureCallbackAdaptor` and
//! `on_out_of_memory`. The retry loop and the hook registry are the core's
//! (`devmm::FailureCallbackAdaptor`, `devmm::on_out_of_memory`); this
//! module only calls the Python callables and converts what they return
//! or raise.

use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyException, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use pyo3::{PyTraverseError, PyVisit};

use crate::adaptors::{adapt, upstream_of};
use crate::error::{defer_interrupt, take_deferred_interrupt, to_py_err, PythonException};
use crate::expected::type_name;
use crate::resource::{built, callable_name, shipped_new, PyMemoryResource, PythonRef};

type Upstream = Arc<dyn devmm::MemoryResource>;

/// The Python exception for `error`, as the caller would see it, made
/// without taking an interrupt a logging handler deferred during the call
/// (that one is still the binding's to raise).
fn exception_for(py: Python<'_>, error: &devmm::Error) -> PyErr {
    let pending = take_deferred_interrupt();
    let exception = to_py_err(error.clone());
    if let Some(interrupt) = pending {
        // An interrupt is no `Exception`, so it is kept again.
        let _ = defer_interrupt(py, interrupt);
    }
    exception
}

/// The core's callback error for `raised`, an exception Python code raised
/// while the out-of-memory `error` was being handled: the exception keeps
/// `error`'s exception as its `__context__`, as if raised in an `except`
/// block for it.
fn raised_during(py: Python<'_>, raised: PyErr, error: &devmm::Error) -> devmm::CallbackError {
    let value = raised.value(py);
    if value.getattr("__context__").is_ok_and(|c| c.is_none()) {
        let original = exception_for(py, error);
        let _ = value.setattr("__context__", original.value(py));
    }
    PythonException::source(py, raised)
}

/// Calls `callback(nbytes, attempt)` when its upstream runs out of memory
/// and retries the allocation while it returns `True`, as rmm's
/// `failure_callback_resource_adaptor`. `attempt` is 1 on the first
/// failure of a request. The callback may free memory (drop a cache, trim a
/// pool, synchronize a stream); returning `False` raises the upstream's
/// `OutOfMemoryError`. Only out-of-memory errors call it. It loops for as
/// long as the callback says retry: bound it with `attempt`. An exception
/// the callback raises propagates, with the out-of-memory error as its
/// `__context__`; a result that is not a `bool` is a `TypeError`.
///
/// `FailureCallbackAdaptor(upstream, callback)`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> tries = []
/// >>> def retry_twice(nbytes, attempt):
/// ...     tries.append(attempt)
/// ...     return attempt < 3
/// >>> limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)
/// >>> adaptor = devmm.FailureCallbackAdaptor(limited, retry_twice)
/// >>> try:
/// ...     adaptor.allocate(100)
/// ... except devmm.OutOfMemoryError:
/// ...     print(tries)
/// [1, 2, 3]
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "FailureCallbackAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyFailureCallbackAdaptor {
    adaptor: OnceLock<Arc<devmm::FailureCallbackAdaptor<Upstream>>>,
    /// The callback, as the native adaptor's closure holds it.
    callback: OnceLock<Arc<PythonRef>>,
}

impl PyFailureCallbackAdaptor {
    /// The callback, while this object and its base are the only owners
    /// of the native adaptor (no buffer or other adaptor shares it): then
    /// it is this object's to report to the collector, so a callback that
    /// refers back to the adaptor is a cycle the collector can free.
    fn owned_callback(&self) -> Option<&PythonRef> {
        let adaptor = self.adaptor.get()?;
        // One reference here, one in the base class.
        (Arc::strong_count(adaptor) == 2)
            .then(|| self.callback.get().map(|c| &**c))
            .flatten()
    }
}

shipped_new!(PyFailureCallbackAdaptor);

#[pymethods]
impl PyFailureCallbackAdaptor {
    fn __init__(
        slf: &Bound<'_, Self>,
        upstream: &Bound<'_, PyMemoryResource>,
        callback: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        if !callback.is_callable() {
            return Err(PyTypeError::new_err(format!(
                "FailureCallbackAdaptor's callback must be callable as callback(nbytes, attempt) \
                 -> bool, got {}",
                type_name(callback)
            )));
        }
        let name = format!(
            "FailureCallbackAdaptor callback {}",
            callable_name(callback)
        );
        let slot = Arc::new(PythonRef::new(callback.clone().unbind()));
        let held = Arc::clone(&slot);
        let call = move |nbytes: usize, attempt: usize, error: &devmm::Error| {
            let called = crate::gil::attach(|py| {
                let result = held
                    .get(py)
                    .and_then(|callback| crate::gil::call(&callback, (nbytes, attempt), None))
                    .and_then(|retry| {
                        retry.extract::<bool>().map_err(|_| {
                            PyTypeError::new_err(format!(
                                "{name} must return a bool (whether to retry), got {}",
                                type_name(&retry)
                            ))
                        })
                    });
                result.map_err(|raised| raised_during(py, raised, error))
            });
            // No interpreter left to call into: nothing can be freed.
            called.unwrap_or(Ok(false))
        };
        let (adaptor, base) = adapt(upstream, |mr| {
            Ok(devmm::FailureCallbackAdaptor::new(mr, call))
        })?;
        PyMemoryResource::install(slf.as_super(), base)?;
        let this = slf.borrow();
        let _ = this.adaptor.set(adaptor);
        let _ = this.callback.set(slot);
        Ok(())
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        match self.owned_callback() {
            Some(callback) => callback.traverse(&visit),
            None => Ok(()),
        }
    }

    fn __clear__(&self) {
        if let Some(callback) = self.owned_callback() {
            callback.clear();
        }
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, &**built(&self.adaptor)?)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let upstream = upstream_of(py, &**built(&self.adaptor)?)?;
        Ok(format!(
            "FailureCallbackAdaptor(upstream={})",
            upstream.bind(py).repr()?
        ))
    }
}

/// The registration of an `on_out_of_memory` hook: `remove()` unregisters
/// it; as a context manager it is removed when the block ends.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)
/// >>> with devmm.on_out_of_memory(lambda error: print("hook:", error.nbytes)):
/// ...     try:
/// ...         devmm.DeviceBuffer(100, mr=limited)
/// ...     except MemoryError:
/// ...         pass
/// hook: 100
///
/// ```
#[pyclass(frozen, name = "OutOfMemoryHook", module = "devmm")]
pub(crate) struct PyOutOfMemoryHook {
    hook: devmm::OutOfMemoryHook,
}

#[pymethods]
impl PyOutOfMemoryHook {
    /// Unregisters the hook; `False` when it was already removed.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> hook = devmm.on_out_of_memory(print)
    /// >>> hook.remove(), hook.remove()
    /// (True, False)
    ///
    /// ```
    fn remove(&self) -> bool {
        self.hook.remove()
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    /// Removes the hook; an exception of the block propagates.
    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, _exc: &Bound<'_, PyTuple>) -> bool {
        self.hook.remove();
        false
    }

    fn __repr__(&self) -> String {
        format!("<devmm.{:?}>", self.hook)
    }
}

/// Registers `hook`, called as `hook(error)` with every out-of-memory
/// error before it propagates from devmm's allocations (buffers, tensors,
/// `mr.allocate`, NumPy's allocator, and the PyTorch, CuPy and Numba
/// bridges), once per
/// failure, on the failing thread. `error` is the exception about to be
/// raised: a `devmm.OutOfMemoryError`, or the `MemoryError` a Python
/// resource raised. A hook that raises does not hide the error: its
/// exception is logged on the `devmm.out_of_memory` logger and the next
/// hook runs. Returns a handle whose `remove()` unregisters it; dropping
/// the handle keeps the hook registered.
///
/// `hook` is any callable taking one argument. Returns an
/// `OutOfMemoryHook`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> seen = []
/// >>> hook = devmm.on_out_of_memory(lambda error: seen.append((error.nbytes, str(error.device))))
/// >>> limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)
/// >>> try:
/// ...     devmm.empty((100,), "uint8", mr=limited, layout=devmm.RowMajor())
/// ... except devmm.OutOfMemoryError:
/// ...     pass
/// >>> seen, hook.remove()
/// ([(100, 'cpu:0')], True)
///
/// ```
#[pyfunction]
pub(crate) fn on_out_of_memory(hook: &Bound<'_, PyAny>) -> PyResult<PyOutOfMemoryHook> {
    if !hook.is_callable() {
        return Err(PyTypeError::new_err(format!(
            "on_out_of_memory takes a callable hook(error), got {}",
            type_name(hook)
        )));
    }
    let hook = hook.clone().unbind();
    let run = move |error: &devmm::Error| -> Result<(), devmm::CallbackError> {
        let ran = crate::gil::attach(|py| {
            let exception = exception_for(py, error);
            match crate::gil::call(hook.bind(py), (exception.value(py),), None) {
                Ok(_) => Ok(()),
                Err(raised) if raised.is_instance_of::<PyException>(py) => {
                    Err(raised_during(py, raised, error))
                }
                // An interrupt reaches the program through the binding
                // that made the allocation, in place of its error.
                Err(interrupt) => {
                    let _ = defer_interrupt(py, interrupt);
                    Ok(())
                }
            }
        });
        ran.unwrap_or(Ok(()))
    };
    Ok(PyOutOfMemoryHook {
        hook: devmm::on_out_of_memory(run),
    })
}
