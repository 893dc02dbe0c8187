//! How devmm errors surface in Python: each variant becomes the exception
//! the seed names, and an exception raised by Python code devmm called back
//! (a Python-defined resource) travels through the core as the source of
//! a [`devmm::Error::Callback`] and comes back out as the same object.

use std::cell::RefCell;
use std::fmt;

use devmm::ErrorKind;
use pyo3::exceptions::{
    PyAssertionError, PyAttributeError, PyBufferError, PyImportError, PyMemoryError, PyOSError,
    PyRecursionError, PyRuntimeError, PyValueError,
};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::value_class::ValueClass;

pyo3::create_exception!(
    devmm,
    RuntimeUnavailableError,
    PyImportError,
    "A runtime (CUDA, ROCm) or the library a resource wraps is not available on this machine. \
     An `ImportError`: its message says what was tried and what to install or set.\n\n\
     Examples\n\
     --------\n\n\
     >>> import devmm\n\
     >>> try:\n\
     ...     devmm.runtime_for(\"tpu\")\n\
     ... except ImportError as error:  # a devmm.RuntimeUnavailableError\n\
     ...     print(type(error).__name__, error)\n\
     RuntimeUnavailableError runtime \"tpu\" is unavailable: no runtime is registered for it ...\n"
);

pyo3::create_exception!(
    devmm,
    StreamError,
    PyRuntimeError,
    "A stream hand-off failed: the driver could not make one stream wait for another (`Stream.wait`, `wait_raw`, `make_stream_wait`, a DLPack `stream=` exchange), or a stream operation was refused because a stream is capturing a graph. \
     A `RuntimeError`; only GPU runtimes raise it.\n\n\
     Examples\n\
     --------\n\n\
     >>> import devmm\n\
     >>> issubclass(devmm.StreamError, RuntimeError)\n\
     True\n\
     >>> stream = devmm.runtime_for(\"cpu\").default_stream(\"cpu\")\n\
     >>> try:\n\
     ...     stream.wait(stream)  # on a GPU, a failed event wait raises StreamError\n\
     ... except devmm.StreamError as error:\n\
     ...     print(error)\n"
);

pyo3::create_exception!(
    devmm.testing,
    RecordingMisuseError,
    PyAssertionError,
    "A caller broke the allocate/deallocate contract of a RecordingMemoryResource \
     (double free, unknown pointer, wrong size). An AssertionError, so misuse fails a test.\n\n\
     Examples\n\
     --------\n\n\
     >>> from devmm.testing import RecordingMemoryResource, RecordingMisuseError\n\
     >>> recording = RecordingMemoryResource()\n\
     >>> try:\n\
     ...     recording.deallocate(4096, 64)\n\
     ... except RecordingMisuseError as error:\n\
     ...     print(isinstance(error, AssertionError), error)\n\
     True misuse of RecordingMemoryResource(device=cpu:0, alignment=256) on cpu:0: foreign-free: ...\n"
);

/// An exception raised by Python code devmm called, carried by the core as
/// an error source; `repr` is its text for Rust readers (no GIL needed).
pub(crate) struct PythonException {
    /// Always `Some` until dropped.
    err: Option<PyErr>,
    repr: String,
}

impl Drop for PythonException {
    /// Released now, under the GIL: an error dropped where pyo3 does not
    /// know the GIL is held (a C callback such as NumPy's free) would
    /// otherwise wait, with its traceback's frames, for pyo3's next call.
    fn drop(&mut self) {
        let err = self.err.take();
        let _ = crate::gil::attach(move |_| drop(err));
    }
}

impl PythonException {
    /// The [`devmm::Error::Callback`] for `err`, raised by `callback`
    /// called for `device`; a `MemoryError` is the callback's refusal for
    /// want of memory ([`devmm::CallbackError::out_of_memory`]).
    pub(crate) fn raised(
        py: Python<'_>,
        err: PyErr,
        callback: impl Into<String>,
        device: Option<devmm::Device>,
    ) -> devmm::Error {
        devmm::Error::callback(callback, device, PythonException::source(py, err))
    }

    /// The core's error source for `err`; a `MemoryError` is a refusal for
    /// want of memory ([`devmm::CallbackError::out_of_memory`]).
    pub(crate) fn source(py: Python<'_>, err: PyErr) -> devmm::CallbackError {
        let repr = err
            .value(py)
            .repr()
            .map_or_else(|_| "an exception".into(), |r| r.to_string());
        let out_of_memory = err.is_instance_of::<PyMemoryError>(py);
        let exception = PythonException {
            err: Some(err),
            repr,
        };
        if out_of_memory {
            devmm::CallbackError::out_of_memory(exception)
        } else {
            devmm::CallbackError::new(exception)
        }
    }
}

/// The exception Python code devmm called raised, when `err` carries one.
fn raised(err: &devmm::Error) -> Option<&PyErr> {
    let devmm::Error::Callback { source, .. } = err else {
        return None;
    };
    source
        .downcast_ref::<PythonException>()
        .and_then(|e| e.err.as_ref())
}

/// Whether `err` carries an exception of type `T` that Python code devmm
/// called raised.
pub(crate) fn raised_python<T: pyo3::PyTypeInfo>(py: Python<'_>, err: &devmm::Error) -> bool {
    raised(err).is_some_and(|e| e.is_instance_of::<T>(py))
}

impl fmt::Debug for PythonException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.repr)
    }
}

impl fmt::Display for PythonException {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "raised {}", self.repr)
    }
}

impl std::error::Error for PythonException {}

thread_local! {
    /// A `KeyboardInterrupt` (or another exception that is not an
    /// `Exception`) raised by Python code devmm called where no error can
    /// be returned (a logging handler, inside a `tracing` subscriber): the
    /// binding that made the call raises it instead of the call's result.
    static INTERRUPT: RefCell<Option<PyErr>> = const { RefCell::new(None) };
}

/// Keeps `err` for the binding that is calling into devmm on this thread,
/// when it is an interrupt the program must see (not an `Exception`);
/// returns it back otherwise, for the caller to report as unraisable.
pub(crate) fn defer_interrupt(py: Python<'_>, err: PyErr) -> Option<PyErr> {
    if err.is_instance_of::<pyo3::exceptions::PyException>(py) {
        return Some(err);
    }
    // Dropped outside the borrow: dropping an exception can run Python code.
    let stale = INTERRUPT.replace(Some(err));
    drop(stale);
    None
}

/// The interrupt [`defer_interrupt`] kept, if any.
pub(crate) fn take_deferred_interrupt() -> Option<PyErr> {
    INTERRUPT.take()
}

/// Converts a devmm error to the Python exception users expect, by its
/// core [`ErrorKind`]: the one mapping of the binding, exhaustive, so a new
/// kind does not compile until it is given its exception. A Python
/// callback's exception comes back as itself; a failed free as its
/// cause's, with a note that `free()` may be retried.
pub(crate) fn to_py_err(err: devmm::Error) -> PyErr {
    if let Some(interrupt) = take_deferred_interrupt() {
        return interrupt;
    }
    let message = err.to_string();
    match err.kind() {
        ErrorKind::Callback => match raised(&err) {
            Some(raised) => Python::attach(|py| raised.clone_ref(py)),
            None => PyRuntimeError::new_err(message),
        },
        ErrorKind::FreeFailed => {
            let devmm::Error::FreeFailed { source, .. } = err else {
                unreachable!("only FreeFailed is of kind FreeFailed")
            };
            let cause = to_py_err(*source);
            Python::attach(|py| {
                let _ = cause.value(py).call_method1("add_note", (message,));
            });
            cause
        }
        ErrorKind::TestDoubleMisuse => RecordingMisuseError::new_err(message),
        ErrorKind::OutOfMemory => out_of_memory_error(message, err.out_of_memory_figures()),
        ErrorKind::MemoryExhausted => PyMemoryError::new_err(message),
        ErrorKind::InvalidValue => PyValueError::new_err(message),
        ErrorKind::RuntimeUnavailable => RuntimeUnavailableError::new_err(message),
        // Python's own name for a call nested deeper than it follows.
        ErrorKind::ChainTooDeep => PyRecursionError::new_err(message),
        ErrorKind::Interchange => PyBufferError::new_err(message),
        ErrorKind::StreamOrder => StreamError::new_err(message),
        ErrorKind::Driver | ErrorKind::WrongOrder => PyRuntimeError::new_err(message),
        ErrorKind::Io => match err {
            // `OSError(errno, message)`, which Python turns into the
            // subclass the number names (`PermissionError`, ...).
            devmm::Error::Io {
                errno: Some(errno), ..
            } => PyOSError::new_err((errno, message)),
            _ => PyOSError::new_err(message),
        },
    }
}

/// The Python protocol a failure is reported through, where the protocol
/// names its own exception for a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Protocol {
    /// `__dlpack__` and the C exchange: every refusal (an invalid value,
    /// a closed buffer, a `stream=` the device has no use for) is a
    /// `BufferError`, as the DLPack protocol asks.
    Dlpack,
    /// The buffer protocol (PEP 3118): every failure is a `BufferError`.
    Buffer,
    /// `__array_interface__` / `__cuda_array_interface__`: memory it cannot
    /// describe is an `AttributeError` (so `hasattr` is false), and freed
    /// memory a `BufferError`, as the other protocols refuse it (NumPy reads
    /// an `AttributeError` as "no interface" and would wrap the tensor in a
    /// 0-d object array rather than fail).
    ArrayInterface,
}

/// Converts `err` as `protocol` reports it; what the protocol does not
/// name (out of memory, a driver failure) converts as [`to_py_err`].
pub(crate) fn protocol_error(protocol: Protocol, err: devmm::Error) -> PyErr {
    let refusal = err.kind() == ErrorKind::InvalidValue;
    let closed = matches!(err, devmm::Error::BufferClosed { .. });
    match protocol {
        Protocol::Buffer => PyBufferError::new_err(err.to_string()),
        Protocol::Dlpack if refusal => PyBufferError::new_err(err.to_string()),
        Protocol::Dlpack => to_py_err(err),
        Protocol::ArrayInterface if closed => PyBufferError::new_err(err.to_string()),
        Protocol::ArrayInterface => PyAttributeError::new_err(err.to_string()),
    }
}

/// `devmm.OutOfMemoryError` (defined in Python, a `MemoryError`).
static OUT_OF_MEMORY_ERROR: ValueClass<()> =
    ValueClass::new("devmm._out_of_memory", "OutOfMemoryError");

/// The `devmm.OutOfMemoryError` saying `message`, with the failure's
/// `figures` as its fields; a plain `MemoryError` when the class cannot
/// be had (the interpreter is shutting down).
fn out_of_memory_error(message: String, figures: Option<devmm::OutOfMemoryFigures>) -> PyErr {
    let made = figures.and_then(|figures| {
        crate::gil::attach(|py| {
            let kwargs = PyDict::new(py);
            kwargs.set_item("device", crate::device_value::PyDevice(figures.device))?;
            kwargs.set_item("nbytes", figures.nbytes)?;
            kwargs.set_item("chain", &figures.chain)?;
            let pool = figures
                .pool
                .map(|pool| crate::pool_statistics::pool_statistics_object(py, &pool))
                .transpose()?;
            kwargs.set_item("pool", pool)?;
            kwargs.set_item("largest_fit", figures.largest_fit)?;
            let exception = OUT_OF_MEMORY_ERROR
                .class(py)?
                .call((&message,), Some(&kwargs))?;
            Ok::<_, PyErr>(PyErr::from_value(exception))
        })
        .and_then(Result::ok)
    });
    made.unwrap_or_else(|| PyMemoryError::new_err(message))
}

/// `Result<T, devmm::Error>` (or of an error that converts into one, such
/// as `devmm::ParseDeviceError`) → `PyResult<T>`.
pub(crate) trait IntoPyResult<T> {
    /// Converts the error with [`to_py_err`].
    fn py(self) -> PyResult<T>;
}

impl<T, E: Into<devmm::Error>> IntoPyResult<T> for Result<T, E> {
    /// An interrupt deferred during the call wins over its result: a value
    /// the caller would have received is dropped (a buffer is freed).
    fn py(self) -> PyResult<T> {
        let value = self.map_err(|e| to_py_err(e.into()))?;
        match take_deferred_interrupt() {
            Some(interrupt) => Err(interrupt),
            None => Ok(value),
        }
    }
}
