//! The adaptors and the callback resource: native resources composed over
//! any resource, Python-defined ones included. Each adaptor's core
//! resource holds its upstream's, which holds the upstream Python object
//! as its origin: the whole chain lives as long as the adaptor, and
//! `upstream` is read back from the core.

use std::sync::{Arc, OnceLock, Weak};

use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::{intern, PyTraverseError, PyVisit};

use crate::count::{Alignment, Count, LimitBytes};
use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::expected::expected;
use crate::log_bridge;
use crate::resource::{
    built, callable_name, origin_object, python_resource, resource_of, shipped_new, FindCallable,
    PyMemoryResource, PythonRef,
};

type Upstream = Arc<dyn devmm::MemoryResource>;

/// What every adaptor's constructor builds: the native adaptor over the
/// upstream's core resource (which holds the upstream object as its
/// origin), and the base class, which allocates through the adaptor.
pub(crate) fn adapt<A: devmm::MemoryResource + 'static>(
    upstream: &Bound<'_, PyMemoryResource>,
    make: impl FnOnce(Upstream) -> PyResult<A>,
) -> PyResult<(Arc<A>, PyMemoryResource)> {
    let adaptor = Arc::new(make(resource_of(upstream)?)?);
    Ok((Arc::clone(&adaptor), PyMemoryResource::native(adaptor)))
}

/// The Python object `adaptor` forwards to, recovered from the core.
pub(crate) fn upstream_of(
    py: Python<'_>,
    adaptor: &dyn devmm::MemoryResource,
) -> PyResult<Py<PyMemoryResource>> {
    match adaptor
        .upstream()
        .and_then(|upstream| origin_object(py, upstream))
    {
        Some(upstream) => upstream,
        None => Err(PyRuntimeError::new_err(format!(
            "{adaptor:?} has no Python upstream"
        ))),
    }
}

/// Counts bytes and calls through its upstream: `current_bytes`,
/// `peak_bytes`, `total_bytes`, `allocations`, `deallocations`.
///
/// `StatisticsAdaptor(upstream)`: `upstream` is any `DeviceMemoryResource`.
/// `statistics` returns all counters at once.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> stats = devmm.StatisticsAdaptor(MallocMemoryResource())
/// >>> ptr = stats.allocate(64)
/// >>> stats.current_bytes, stats.total_bytes, stats.allocations
/// (64, 64, 1)
/// >>> stats.deallocate(ptr, 64)
/// >>> stats.current_bytes, stats.peak_bytes
/// (0, 64)
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "StatisticsAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyStatisticsAdaptor {
    stats: OnceLock<Arc<devmm::StatisticsAdaptor<Upstream>>>,
}

impl PyStatisticsAdaptor {
    fn stats(&self) -> PyResult<&devmm::StatisticsAdaptor<Upstream>> {
        built(&self.stats).map(|stats| &**stats)
    }
}

shipped_new!(PyStatisticsAdaptor);

#[pymethods]
impl PyStatisticsAdaptor {
    fn __init__(slf: &Bound<'_, Self>, upstream: &Bound<'_, PyMemoryResource>) -> PyResult<()> {
        let (stats, base) = adapt(upstream, |mr| Ok(devmm::StatisticsAdaptor::new(mr)))?;
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().stats.set(stats);
        Ok(())
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, self.stats()?)
    }

    /// Bytes allocated and not yet deallocated.
    #[getter]
    fn current_bytes(&self) -> PyResult<usize> {
        Ok(self.stats()?.current_bytes())
    }

    /// The most bytes live at once.
    #[getter]
    fn peak_bytes(&self) -> PyResult<usize> {
        Ok(self.stats()?.peak_bytes())
    }

    /// Bytes ever allocated.
    #[getter]
    fn total_bytes(&self) -> PyResult<usize> {
        Ok(self.stats()?.total_bytes())
    }

    /// Successful allocations.
    #[getter]
    fn allocations(&self) -> PyResult<usize> {
        Ok(self.stats()?.statistics().allocations)
    }

    /// Successful deallocations.
    #[getter]
    fn deallocations(&self) -> PyResult<usize> {
        Ok(self.stats()?.statistics().deallocations)
    }

    /// All counters at once, as a `devmm.statistics.Statistics`.
    ///
    /// Python type: `devmm.statistics.Statistics`
    #[getter]
    fn statistics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        crate::statistics::statistics_object(py, &self.stats()?.statistics())
    }
}

/// Refuses (with `MemoryError`) any allocation that would take its usage
/// past `limit_bytes`, without asking its upstream.
///
/// `LimitingAdaptor(upstream, limit_bytes)`: `limit_bytes` is an int; the
/// refusal is a `devmm.OutOfMemoryError` whose `largest_fit` is the budget
/// left.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> limited = devmm.LimitingAdaptor(MallocMemoryResource(), limit_bytes=64)
/// >>> limited.deallocate(limited.allocate(64), 64)
/// >>> limited.allocate(65)
/// Traceback (most recent call last):
///     ...
/// devmm._out_of_memory.OutOfMemoryError: limit exceeded: allocation of 65 bytes on cpu:0 would exceed the 64-byte limit ...
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "LimitingAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyLimitingAdaptor {
    limiting: OnceLock<Arc<devmm::LimitingAdaptor<Upstream>>>,
}

impl PyLimitingAdaptor {
    fn limiting(&self) -> PyResult<&devmm::LimitingAdaptor<Upstream>> {
        built(&self.limiting).map(|limiting| &**limiting)
    }
}

shipped_new!(PyLimitingAdaptor);

#[pymethods]
impl PyLimitingAdaptor {
    fn __init__(
        slf: &Bound<'_, Self>,
        upstream: &Bound<'_, PyMemoryResource>,
        limit_bytes: Count<LimitBytes>,
    ) -> PyResult<()> {
        let limit_bytes = limit_bytes.get();
        let (limiting, base) = adapt(upstream, |mr| {
            Ok(devmm::LimitingAdaptor::new(mr, limit_bytes))
        })?;
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().limiting.set(limiting);
        Ok(())
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, self.limiting()?)
    }

    /// The budget, in bytes.
    #[getter]
    fn limit_bytes(&self) -> PyResult<usize> {
        Ok(self.limiting()?.limit_bytes())
    }

    /// Bytes allocated through the adaptor and not yet deallocated.
    #[getter]
    fn used_bytes(&self) -> PyResult<usize> {
        Ok(self.limiting()?.used_bytes())
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let upstream = upstream_of(py, self.limiting()?)?;
        let limit = self.limiting()?.limit_bytes();
        Ok(format!(
            "LimitingAdaptor(limit_bytes={limit}, upstream={})",
            upstream.bind(py).repr()?
        ))
    }
}

/// Logs every call as a structured record on `logger` (the `devmm.mr`
/// logger when `None`), with the attributes `op`, `ptr`, `nbytes`,
/// `stream`, `device`, and `error` on failure.
///
/// `LoggingAdaptor(upstream, logger=None)`: `logger` is a `logging.Logger`
/// (or anything with its `isEnabledFor` and `log`); records are at `DEBUG`
/// level, failures at `ERROR`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import logging, sys
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> logger = logging.getLogger("devmm.example")
/// >>> logger.setLevel(logging.DEBUG)
/// >>> logger.propagate = False
/// >>> logger.addHandler(logging.StreamHandler(sys.stdout))
/// >>> logged = devmm.LoggingAdaptor(MallocMemoryResource(), logger=logger)
/// >>> logged.deallocate(logged.allocate(64), 64)
/// allocate device=cpu:0 nbytes=64 ptr=0x... stream=0
/// deallocate device=cpu:0 nbytes=64 ptr=0x... stream=0
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "LoggingAdaptor", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyLoggingAdaptor {
    logging: OnceLock<Arc<devmm::LoggingAdaptor<Upstream>>>,
}

shipped_new!(PyLoggingAdaptor);

#[pymethods]
impl PyLoggingAdaptor {
    #[pyo3(signature = (upstream, logger = None))]
    fn __init__(
        slf: &Bound<'_, Self>,
        upstream: &Bound<'_, PyMemoryResource>,
        logger: Option<LoggerArg>,
    ) -> PyResult<()> {
        let (logging, base) = match logger {
            None => adapt(upstream, |mr| Ok(devmm::LoggingAdaptor::new(mr)))?,
            Some(LoggerArg(logger)) => {
                // The events name the logger by a key the log bridge finds
                // the object by, for as long as the adaptor lives.
                let key = log_bridge::logger_key();
                let (logging, base) = adapt(upstream, |mr| {
                    Ok(devmm::LoggingAdaptor::with_logger(mr, key.as_str()))
                })?;
                let owner: Weak<dyn std::any::Any + Send + Sync> = Arc::downgrade(&logging) as _;
                log_bridge::register_logger(key, owner, logger);
                (logging, base)
            }
        };
        PyMemoryResource::install(slf.as_super(), base)?;
        let _ = slf.borrow().logging.set(logging);
        Ok(())
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        upstream_of(py, &**built(&self.logging)?)
    }
}

/// The `logging.Logger` the records go to, used as given: any object with
/// its `isEnabledFor` and `log` methods (a `logging.LoggerAdapter` too).
///
/// Python type: `logging.Logger | None`
pub(crate) struct LoggerArg(Py<PyAny>);

impl<'py> FromPyObject<'_, 'py> for LoggerArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let py = obj.py();
        for method in [intern!(py, "isEnabledFor"), intern!(py, "log")] {
            if !obj.getattr_opt(method)?.is_some_and(|m| m.is_callable()) {
                return Err(expected("a logging.Logger", &obj));
            }
        }
        Ok(LoggerArg(obj.to_owned().unbind()))
    }
}

/// A resource made of two Python callables: `alloc_fn(nbytes, stream) -> int`
/// and `dealloc_fn(ptr, nbytes, stream)`. Pointers that break the promised
/// `alignment` are given back and reported as `ValueError`; a non-power-of-two
/// `alignment` is a `ValueError` and a NULL pointer for a non-empty request a
/// `MemoryError`. Pass `dereferenceable=True` when the pointers are real
/// memory of `device`; otherwise host copies and NumPy refuse them.
///
/// `CallbackMemoryResource(alloc_fn, dealloc_fn, device=None, alignment=1,
/// dereferenceable=False)`: `device` is a `Device` or a string (`"cpu"`
/// when `None`).
///
/// Examples
/// --------
///
/// ```python
/// >>> import ctypes
/// >>> import devmm
/// >>> live = {}
/// >>> def alloc(nbytes, stream):
/// ...     block = ctypes.create_string_buffer(nbytes)
/// ...     live[ctypes.addressof(block)] = block
/// ...     return ctypes.addressof(block)
/// >>> def dealloc(ptr, nbytes, stream):
/// ...     del live[ptr]
/// >>> mr = devmm.CallbackMemoryResource(alloc, dealloc, "cpu", dereferenceable=True)
/// >>> buf = devmm.DeviceBuffer(16, mr=mr)
/// >>> len(live), buf.free(), len(live)
/// (1, None, 0)
/// >>> devmm.CallbackMemoryResource(alloc, dealloc, alignment=3)
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: CallbackMemoryResource alignment must be a power of two (1 for none), not 3
///
/// ```
#[pyclass(
    extends = PyMemoryResource,
    subclass,
    weakref,
    name = "CallbackMemoryResource",
    module = "devmm"
)]
#[derive(Default)]
pub(crate) struct PyCallbackMemoryResource {
    callables: OnceLock<Callables>,
}

/// The two callables, as the native resource's closures hold them, and the
/// native resource (the base class owns it), to tell whether anything else
/// shares it.
type Callables = ([Arc<PythonRef>; 2], Weak<dyn devmm::MemoryResource>);

shipped_new!(PyCallbackMemoryResource);

#[pymethods]
impl PyCallbackMemoryResource {
    #[pyo3(signature = (alloc_fn, dealloc_fn, device = None, alignment = Count::of(1), dereferenceable = false))]
    #[pyo3(
        text_signature = "($self, alloc_fn, dealloc_fn, device=None, alignment=1, dereferenceable=False)"
    )]
    fn __init__(
        slf: &Bound<'_, Self>,
        alloc_fn: &Bound<'_, PyAny>,
        dealloc_fn: &Bound<'_, PyAny>,
        device: Option<DeviceArg>,
        alignment: Count<Alignment>,
        dereferenceable: bool,
    ) -> PyResult<()> {
        let alignment = alignment.get();
        let device = device.map_or(devmm::Device::CPU, |d| d.0);
        let slots = [alloc_fn, dealloc_fn].map(|f| Arc::new(PythonRef::new(f.clone().unbind())));
        let callables = [(alloc_fn, &slots[0]), (dealloc_fn, &slots[1])].map(|(f, slot)| {
            let slot = Arc::clone(slot);
            let find: FindCallable = Box::new(move |py| slot.get(py));
            (callable_name(f), find)
        });
        let name = "CallbackMemoryResource".to_owned();
        let mr = python_resource(device, alignment, dereferenceable, name, callables).py()?;
        let native = Arc::downgrade(&mr);
        PyMemoryResource::install(slf.as_super(), PyMemoryResource::native(mr))?;
        let _ = slf.borrow().callables.set((slots, native));
        Ok(())
    }

    /// The callables belong to the native resource; while this object is
    /// its only owner (no buffer or adaptor shares it), they are this
    /// object's to report, so a closure that refers back to the resource
    /// is a cycle the collector can free.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if let Some((callables, native)) = self.callables.get() {
            if native.strong_count() == 1 {
                for callable in callables {
                    callable.traverse(&visit)?;
                }
            }
        }
        Ok(())
    }

    /// The seed's form, `CallbackMemoryResource(device=cpu:0)` (a
    /// subclass shows its own name); errors name the alignment too.
    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let device = slf.getattr(pyo3::intern!(slf.py(), "device"))?;
        Ok(format!(
            "{}(device={})",
            slf.get_type().name()?,
            device.str()?
        ))
    }

    fn __clear__(&self) {
        if let Some((callables, native)) = self.callables.get() {
            if native.strong_count() == 1 {
                callables.iter().for_each(|callable| callable.clear());
            }
        }
    }
}
