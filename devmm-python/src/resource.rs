//! `DeviceMemoryResource`: the base of every resource Python sees, and the
//! bridge that lets Python code define one.
//!
//! A native resource (malloc, the adaptors, ...) carries its Rust
//! `Arc<dyn MemoryResource>`. A Python subclass that writes `allocate` and
//! `deallocate` in Python carries none; when devmm needs it as a Rust
//! resource, [`resource_of`] wraps its bound methods in a
//! [`devmm::CallbackMemoryResource`], which holds the Python object
//! strongly for as long as any buffer allocated from it lives.

use std::sync::Arc;

use pyo3::exceptions::{PyAttributeError, PyMemoryError, PyNotImplementedError, PyTypeError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};

use crate::count::{Count, Nbytes};
use crate::device::{DeviceArg, PyDevice};
use crate::error::{stash_python_error, IntoPyResult};
use crate::stream::{maybe_detached, resolve_stream, PyStream, StreamArg};

/// A memory resource, shaped like rmm's `DeviceMemoryResource`:
/// `allocate(nbytes, stream) -> int` and `deallocate(ptr, nbytes, stream)`,
/// with the probes `device`, `stream_ordered`, `guaranteed_alignment()`
/// and `available_memory()`.
///
/// Subclass it in Python and override `allocate` and `deallocate` to
/// define a resource; set `self.device` in `__init__` when it is not the
/// CPU, and override `guaranteed_alignment()` to promise an alignment.
/// Like an abstract base class, it cannot be instantiated until both are
/// overridden. Resources are weak-referenceable.
#[pyclass(subclass, weakref, name = "DeviceMemoryResource", module = "devmm")]
pub(crate) struct PyMemoryResource {
    pub(crate) native: Option<Arc<dyn devmm::MemoryResource>>,
    device: devmm::Device,
}

impl PyMemoryResource {
    /// The base part of a native resource.
    pub(crate) fn native(mr: Arc<dyn devmm::MemoryResource>) -> Self {
        PyMemoryResource {
            device: mr.device(),
            native: Some(mr),
        }
    }

    fn require_native(
        &self,
        obj: &Bound<'_, PyAny>,
        what: &str,
    ) -> PyResult<&Arc<dyn devmm::MemoryResource>> {
        self.native.as_ref().ok_or_else(|| {
            let name = obj
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_else(|_| "DeviceMemoryResource".into());
            PyNotImplementedError::new_err(format!(
                "{name} must override {what}: Python resources define allocate and deallocate"
            ))
        })
    }
}

#[pymethods]
impl PyMemoryResource {
    /// A resource for Python subclasses to complete (on `cpu:0` until
    /// `self.device` is set). Arguments belong to the subclass and are ignored here.
    /// A class that does not override `allocate` and `deallocate` is
    /// abstract: instantiating it is a `TypeError`, as with `abc.ABC`.
    #[new]
    #[classmethod]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn py_new(
        cls: &Bound<'_, PyType>,
        _args: &Bound<'_, PyTuple>,
        _kwargs: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let base = cls.py().get_type::<PyMemoryResource>();
        let mut missing = Vec::new();
        for method in ["allocate", "deallocate"] {
            if cls.getattr(method)?.is(&base.getattr(method)?) {
                missing.push(method);
            }
        }
        if !missing.is_empty() {
            return Err(PyTypeError::new_err(format!(
                "Can't instantiate abstract class {} with abstract methods {}; \
                 a Python resource overrides allocate(nbytes, stream) and deallocate(ptr, nbytes, stream)",
                cls.name()?,
                missing.join(", ")
            )));
        }
        Ok(PyMemoryResource {
            native: None,
            device: devmm::Device::CPU,
        })
    }

    /// The device the memory lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        self.device.into()
    }

    #[setter]
    fn set_device(&mut self, device: DeviceArg) -> PyResult<()> {
        if self.native.is_some() {
            return Err(PyAttributeError::new_err(
                "the device of a native resource is fixed when it is made",
            ));
        }
        self.device = device.0;
        Ok(())
    }

    /// Whether allocation and release are ordered on the stream passed.
    #[getter]
    fn stream_ordered(&self) -> bool {
        self.native.as_ref().is_some_and(|mr| mr.stream_ordered())
    }

    /// The alignment in bytes every non-null pointer meets (1 promises nothing).
    fn guaranteed_alignment(&self) -> usize {
        self.native
            .as_ref()
            .map_or(1, |mr| mr.guaranteed_alignment())
    }

    /// `(free, total)` bytes as this resource sees them.
    fn available_memory(&self, py: Python<'_>) -> PyResult<(usize, usize)> {
        let info = match &self.native {
            Some(mr) => maybe_detached(py, self.device, || mr.available_memory()),
            None => devmm::runtime_for(self.device).and_then(|rt| rt.memory_info(self.device)),
        }
        .py()?;
        Ok((info.free, info.total))
    }

    /// Allocates `nbytes` ordered on `stream` (the device's default stream
    /// when `None`) and returns the address.
    #[pyo3(signature = (nbytes, stream = None))]
    fn allocate(
        slf: &Bound<'_, Self>,
        nbytes: Count<Nbytes>,
        stream: Option<StreamArg>,
    ) -> PyResult<usize> {
        let nbytes = nbytes.get();
        let this = slf.borrow();
        let mr = Arc::clone(this.require_native(slf.as_any(), "allocate")?);
        drop(this);
        let stream = resolve_stream(stream, mr.device())?;
        let ptr = maybe_detached(slf.py(), mr.device(), || mr.allocate(nbytes, &stream)).py()?;
        Ok(ptr.addr())
    }

    /// Returns `ptr` (from `allocate(nbytes, ...)`) ordered on `stream`.
    ///
    /// Resources that track their allocations report misuse as
    /// `ValueError`; others trust the caller, as rmm's do.
    #[pyo3(signature = (ptr, nbytes, stream = None))]
    fn deallocate(
        slf: &Bound<'_, Self>,
        ptr: usize,
        nbytes: Count<Nbytes>,
        stream: Option<StreamArg>,
    ) -> PyResult<()> {
        let nbytes = nbytes.get();
        let this = slf.borrow();
        let mr = Arc::clone(this.require_native(slf.as_any(), "deallocate")?);
        drop(this);
        let stream = resolve_stream(stream, mr.device())?;
        let ptr = devmm::DevicePtr::from_addr(ptr);
        maybe_detached(slf.py(), mr.device(), || {
            // SAFETY: the contract is the caller's, exactly as for rmm's
            // `deallocate`; resources that can check it (detects_misuse)
            // turn violations into errors.
            unsafe { mr.deallocate(ptr, nbytes, &stream) }
        })
        .py()
    }

    /// Live allocations, for resources that track them (`None` otherwise).
    fn _debug_live_count(&self) -> Option<usize> {
        self.native.as_ref().and_then(|mr| mr.live_count())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let this = slf.borrow();
        Ok(match &this.native {
            Some(mr) => format!("{mr:?}"),
            None => format!("{}(device={})", slf.get_type().name()?, this.device),
        })
    }
}

/// The Rust resource behind a Python resource object: its native resource,
/// or a bridge to the Python methods of a Python-defined one.
pub(crate) fn resource_of(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<Arc<dyn devmm::MemoryResource>> {
    let base = obj.borrow();
    if let Some(mr) = &base.native {
        return Ok(Arc::clone(mr));
    }
    let device = base.device;
    drop(base);
    let alignment: usize = obj.call_method0("guaranteed_alignment")?.extract()?;
    python_resource(
        device,
        alignment,
        obj.getattr("allocate")?.unbind(),
        obj.getattr("deallocate")?.unbind(),
    )
    .py()
}

/// A Rust resource whose allocate and deallocate call Python callables
/// `allocate(nbytes, stream) -> int` and `deallocate(ptr, nbytes, stream)`.
/// A non-power-of-two `alignment` is refused (`InvalidArgument`).
pub(crate) fn python_resource(
    device: devmm::Device,
    alignment: usize,
    allocate: Py<PyAny>,
    deallocate: Py<PyAny>,
) -> devmm::Result<Arc<dyn devmm::MemoryResource>> {
    let alloc_name = callable_name(&allocate);
    let dealloc_name = callable_name(&deallocate);
    let mr = devmm::CallbackMemoryResource::new(
        device,
        alignment,
        move |nbytes, stream| {
            Python::try_attach(|py| {
                let result = allocate
                    .bind(py)
                    .call1((nbytes, PyStream::from(stream.clone())))
                    .and_then(|ptr| ptr.extract::<usize>());
                match result {
                    Ok(addr) => Ok(devmm::DevicePtr::from_addr(addr)),
                    Err(err) => Err(python_failure(py, err, &alloc_name, device, Some(nbytes))),
                }
            })
            .unwrap_or_else(|| Err(interpreter_gone(device)))
        },
        move |ptr, nbytes, stream| {
            // After interpreter shutdown began nothing Python-side can free
            // the memory; the process is ending, so the block is left to it.
            Python::try_attach(|py| {
                deallocate
                    .bind(py)
                    .call1((ptr.addr(), nbytes, PyStream::from(stream.clone())))
                    .map(drop)
                    .map_err(|err| python_failure(py, err, &dealloc_name, device, None))
            })
            .unwrap_or(Ok(()))
        },
    )?;
    Ok(Arc::new(mr))
}

fn callable_name(callable: &Py<PyAny>) -> String {
    Python::attach(|py| {
        let callable = callable.bind(py);
        callable
            .getattr("__qualname__")
            .and_then(|n| n.extract::<String>())
            .unwrap_or_else(|_| "a Python callback".into())
    })
}

/// A devmm error carrying `err`, raised by the Python callback `name`; the
/// exception itself is stashed so Python callers get it back unchanged.
fn python_failure(
    py: Python<'_>,
    err: PyErr,
    name: &str,
    device: devmm::Device,
    nbytes: Option<usize>,
) -> devmm::Error {
    let described = format!(
        "{name} raised {}",
        err.value(py)
            .repr()
            .map(|r| r.to_string())
            .unwrap_or_default()
    );
    let error = match nbytes {
        Some(nbytes) if err.is_instance_of::<PyMemoryError>(py) => devmm::Error::OutOfMemory {
            device,
            nbytes,
            chain: name.to_owned(),
            detail: Some(described.clone()),
        },
        _ => devmm::Error::InvalidArgument {
            reason: described.clone(),
        },
    };
    stash_python_error(described, err);
    error
}

fn interpreter_gone(device: devmm::Device) -> devmm::Error {
    devmm::Error::RuntimeUnavailable {
        name: device.ty().runtime_name().to_owned(),
        reason: "the Python interpreter is shutting down, so a Python resource cannot allocate"
            .into(),
    }
}
