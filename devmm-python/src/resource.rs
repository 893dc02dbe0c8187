//! `DeviceMemoryResource`: the base of every resource Python sees, and the
//! bridge that lets Python code define one.
//!
//! A native resource (malloc, the adaptors, ...) carries its Rust
//! `Arc<dyn MemoryResource>`. A Python subclass that writes `allocate` and
//! `deallocate` in Python carries none; when devmm needs it as a Rust
//! resource, [`resource_of`] wraps its bound methods in a
//! [`devmm::CallbackMemoryResource`], which holds the Python object
//! strongly for as long as any buffer allocated from it lives.

use std::sync::{Arc, Mutex, MutexGuard};

use pyo3::exceptions::{PyAttributeError, PyMemoryError, PyNotImplementedError};
use pyo3::prelude::*;
use pyo3::types::{PyTuple, PyType};
use pyo3::{PyTraverseError, PyVisit};

use crate::count::{Count, Nbytes};
use crate::device::{DeviceArg, PyDevice};
use crate::error::{stash_python_error, take_deferred_interrupt, to_py_err, IntoPyResult};
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
    /// The base part of a native resource that forwards to checked ones
    /// (an adaptor over [`resource_of`]'s resources).
    pub(crate) fn native(mr: Arc<dyn devmm::MemoryResource>) -> Self {
        PyMemoryResource {
            device: mr.device(),
            native: Some(mr),
        }
    }

    /// The base part of a resource that hands out memory itself: behind a
    /// [`devmm::Checked`] ledger, so that no call from Python can free an
    /// unknown pointer, a wrong size or a block twice (docs/adr/0009).
    pub(crate) fn checked(mr: impl devmm::MemoryResource + 'static) -> Self {
        PyMemoryResource::native(Arc::new(devmm::Checked::new(mr)))
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
        crate::abstract_base::require_overrides(
            cls,
            &cls.py().get_type::<PyMemoryResource>(),
            &["allocate", "deallocate"],
            "a Python resource overrides allocate(nbytes, stream) and deallocate(ptr, nbytes, stream)",
        )?;
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

    /// Whether the pointers are real memory of `device` that host copies
    /// and NumPy may dereference. Python subclasses declare it with a class
    /// attribute `dereferenceable = True`; undeclared, such paths are refused.
    #[getter]
    fn dereferenceable(&self) -> bool {
        self.native.as_ref().is_some_and(|mr| mr.dereferenceable())
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
        let ptr = maybe_detached(slf.py(), mr.device(), || mr.allocate(nbytes, &stream))
            .map_err(to_py_err)?;
        if let Some(interrupt) = take_deferred_interrupt() {
            // The caller will never see `ptr`: give it back, then raise.
            // SAFETY: just allocated by `mr` with `nbytes`, never handed out.
            let _ = unsafe { mr.deallocate(ptr, nbytes, &stream) };
            drop(take_deferred_interrupt());
            return Err(interrupt);
        }
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
/// or a bridge to the Python methods of a Python-defined one (see
/// [`bridge_of`]).
pub(crate) fn resource_of(
    obj: &Bound<'_, PyMemoryResource>,
) -> PyResult<Arc<dyn devmm::MemoryResource>> {
    Ok(bridge_of(obj)?.0)
}

/// [`resource_of`], with the slot through which a Python-defined
/// resource's bridge holds the Python object (`None` for native ones), for
/// the wrappers that report that reference to the garbage collector.
///
/// The bridge reads what the subclass says, not the base class's fields: its
/// `device` (a property or class attribute is honoured, and a value that is
/// not a device is a `ValueError`), `guaranteed_alignment()`,
/// `dereferenceable` and its class name. It is behind a ledger like every
/// resource Python makes.
pub(crate) fn bridge_of(obj: &Bound<'_, PyMemoryResource>) -> PyResult<Bridged> {
    if let Some(mr) = &obj.borrow().native {
        return Ok((Arc::clone(mr), None));
    }
    let py = obj.py();
    let device: DeviceArg = obj.getattr(pyo3::intern!(py, "device"))?.extract()?;
    let alignment: usize = obj.call_method0("guaranteed_alignment")?.extract()?;
    let dereferenceable: bool = obj
        .getattr(pyo3::intern!(py, "dereferenceable"))?
        .is_truthy()?;
    let name = obj.get_type().name()?.to_string();
    let slot = Arc::new(PythonRef::new(obj.clone().into_any().unbind()));
    let (on_alloc, on_dealloc) = (Arc::clone(&slot), Arc::clone(&slot));
    let callables = Callables {
        alloc_name: format!("{name}.allocate"),
        dealloc_name: format!("{name}.deallocate"),
        name,
        allocate: Box::new(move |py| on_alloc.get_attr(py, "allocate")),
        deallocate: Box::new(move |py| on_dealloc.get_attr(py, "deallocate")),
    };
    let mr = python_resource(device.0, alignment, dereferenceable, callables).py()?;
    Ok((mr, Some(slot)))
}

/// A Rust resource and, when it bridges a Python-defined one, the slot
/// holding the Python object.
pub(crate) type Bridged = (Arc<dyn devmm::MemoryResource>, Option<Arc<PythonRef>>);

/// Finds a Python callable when a bridge calls it.
pub(crate) type FindCallable = Box<dyn Fn(Python<'_>) -> PyResult<Bound<'_, PyAny>> + Send + Sync>;

/// A strong reference to a Python object held from Rust (by a bridge's
/// closures), in a slot the garbage collector can be shown and can empty.
pub(crate) struct PythonRef(Mutex<Option<Py<PyAny>>>);

impl PythonRef {
    pub(crate) fn new(obj: Py<PyAny>) -> Self {
        PythonRef(Mutex::new(Some(obj)))
    }

    fn slot(&self) -> MutexGuard<'_, Option<Py<PyAny>>> {
        // One store per update: a poisoned lock is still consistent.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The object, or an error once the collector cleared it.
    pub(crate) fn get<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        match self.slot().as_ref() {
            Some(obj) => Ok(obj.bind(py).clone()),
            None => Err(pyo3::exceptions::PyRuntimeError::new_err(
                "the Python object was cleared by the garbage collector with its reference cycle",
            )),
        }
    }

    fn get_attr<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyAny>> {
        self.get(py)?.getattr(name)
    }

    /// Reports the reference to the collector. Only the one Python object
    /// that owns the bridge exclusively may call this, so each reference
    /// is reported once. The lock is only tried: traversal must not block.
    pub(crate) fn traverse(&self, visit: &PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Ok(slot) = self.0.try_lock() {
            if let Some(obj) = slot.as_ref() {
                visit.call(obj)?;
            }
        }
        Ok(())
    }

    /// Drops the reference (the collector breaking a cycle).
    pub(crate) fn clear(&self) {
        let obj = self.slot().take();
        drop(obj);
    }
}

/// How a bridge finds the two Python callables it calls, and what it is
/// called in errors.
pub(crate) struct Callables {
    /// The Python class (or `CallbackMemoryResource`) errors name.
    pub(crate) name: String,
    /// What errors call the allocate callable.
    pub(crate) alloc_name: String,
    /// What errors call the deallocate callable.
    pub(crate) dealloc_name: String,
    /// `allocate(nbytes, stream) -> int`.
    pub(crate) allocate: FindCallable,
    /// `deallocate(ptr, nbytes, stream)`.
    pub(crate) deallocate: FindCallable,
}

/// A checked Rust resource whose allocate and deallocate call the Python
/// callables `callables` finds. A non-power-of-two `alignment` is refused
/// (`InvalidArgument`).
pub(crate) fn python_resource(
    device: devmm::Device,
    alignment: usize,
    dereferenceable: bool,
    callables: Callables,
) -> devmm::Result<Arc<dyn devmm::MemoryResource>> {
    let Callables {
        name,
        alloc_name,
        dealloc_name,
        allocate,
        deallocate,
    } = callables;
    let mr = devmm::CallbackMemoryResource::new(
        device,
        alignment,
        move |nbytes, stream| {
            Python::try_attach(|py| {
                let result = allocate(py)
                    .and_then(|f| f.call1((nbytes, PyStream::from(stream.clone()))))
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
                deallocate(py)
                    .and_then(|f| f.call1((ptr.addr(), nbytes, PyStream::from(stream.clone()))))
                    .map(drop)
                    .map_err(|err| python_failure(py, err, &dealloc_name, device, None))
            })
            .unwrap_or(Ok(()))
        },
    )?
    .named(name)
    .with_dereferenceable_memory(dereferenceable);
    Ok(Arc::new(devmm::Checked::new(mr)))
}

/// A devmm error carrying `err`, raised by the Python callback `name`; the
/// exception itself is stashed so Python callers get it back unchanged.
/// The `__qualname__` of a Python callable, for error messages.
pub(crate) fn callable_name(callable: &Bound<'_, PyAny>) -> String {
    callable
        .getattr("__qualname__")
        .and_then(|n| n.extract::<String>())
        .unwrap_or_else(|_| "a Python callback".into())
}

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
