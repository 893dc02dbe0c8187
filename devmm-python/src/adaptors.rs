//! The adaptors and the callback resource: native resources composed over
//! any resource, Python-defined ones included. Each holds its upstream
//! Python object, so the whole chain lives as long as the adaptor.

use std::sync::{Arc, Weak};

use pyo3::prelude::*;
use pyo3::{PyTraverseError, PyVisit};

use crate::count::{Alignment, Count, LimitBytes};
use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{
    callable_name, python_resource, resource_of, Callables, PyMemoryResource, PythonRef,
};

type Upstream = Arc<dyn devmm::MemoryResource>;

pub(crate) fn adaptor_repr(
    py: Python<'_>,
    name: &str,
    upstream: &Py<PyMemoryResource>,
    extra: &str,
) -> PyResult<String> {
    Ok(format!("{name}({}{extra})", upstream.bind(py).repr()?))
}

/// What every adaptor's constructor builds: the native adaptor over the
/// upstream's resource (shared with the base class, which allocates through
/// it), the Python upstream kept alive beside it, and that base class.
pub(crate) fn adapt<A: devmm::MemoryResource + 'static>(
    upstream: &Bound<'_, PyMemoryResource>,
    make: impl FnOnce(Upstream) -> A,
) -> PyResult<(Arc<A>, Py<PyMemoryResource>, PyMemoryResource)> {
    try_adapt(upstream, |mr| Ok(make(mr)))
}

/// [`adapt`] for adaptors whose construction can fail.
pub(crate) fn try_adapt<A: devmm::MemoryResource + 'static>(
    upstream: &Bound<'_, PyMemoryResource>,
    make: impl FnOnce(Upstream) -> PyResult<A>,
) -> PyResult<(Arc<A>, Py<PyMemoryResource>, PyMemoryResource)> {
    let adaptor = Arc::new(make(resource_of(upstream)?)?);
    let base = PyMemoryResource::native(adaptor.clone());
    Ok((adaptor, upstream.clone().unbind(), base))
}

/// Counts bytes and calls through its upstream: `current_bytes`,
/// `peak_bytes`, `total_bytes`, `allocations`, `deallocations`.
#[pyclass(extends = PyMemoryResource, name = "StatisticsAdaptor", module = "devmm")]
pub(crate) struct PyStatisticsAdaptor {
    stats: Arc<devmm::StatisticsAdaptor<Upstream>>,
    upstream: Py<PyMemoryResource>,
}

#[pymethods]
impl PyStatisticsAdaptor {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.upstream)
    }

    #[new]
    fn py_new(upstream: &Bound<'_, PyMemoryResource>) -> PyResult<(Self, PyMemoryResource)> {
        let (stats, upstream, base) = adapt(upstream, devmm::StatisticsAdaptor::new)?;
        Ok((PyStatisticsAdaptor { stats, upstream }, base))
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> Py<PyMemoryResource> {
        self.upstream.clone_ref(py)
    }

    /// Bytes allocated and not yet deallocated.
    #[getter]
    fn current_bytes(&self) -> usize {
        self.stats.current_bytes()
    }

    /// The most bytes live at once.
    #[getter]
    fn peak_bytes(&self) -> usize {
        self.stats.peak_bytes()
    }

    /// Bytes ever allocated.
    #[getter]
    fn total_bytes(&self) -> usize {
        self.stats.total_bytes()
    }

    /// Successful allocations.
    #[getter]
    fn allocations(&self) -> usize {
        self.stats.statistics().allocations
    }

    /// Successful deallocations.
    #[getter]
    fn deallocations(&self) -> usize {
        self.stats.statistics().deallocations
    }

    /// All counters at once, as a `devmm.statistics.Statistics`.
    #[getter]
    fn statistics(&self) -> crate::statistics::PyStatistics {
        crate::statistics::PyStatistics {
            inner: self.stats.statistics(),
        }
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        adaptor_repr(py, "StatisticsAdaptor", &self.upstream, "")
    }
}

/// Refuses (with `MemoryError`) any allocation that would take its usage
/// past `limit_bytes`, without asking its upstream.
#[pyclass(extends = PyMemoryResource, name = "LimitingAdaptor", module = "devmm")]
pub(crate) struct PyLimitingAdaptor {
    limiting: Arc<devmm::LimitingAdaptor<Upstream>>,
    upstream: Py<PyMemoryResource>,
}

#[pymethods]
impl PyLimitingAdaptor {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.upstream)
    }

    #[new]
    fn py_new(
        upstream: &Bound<'_, PyMemoryResource>,
        limit_bytes: Count<LimitBytes>,
    ) -> PyResult<(Self, PyMemoryResource)> {
        let limit_bytes = limit_bytes.get();
        let (limiting, upstream, base) =
            adapt(upstream, |mr| devmm::LimitingAdaptor::new(mr, limit_bytes))?;
        Ok((PyLimitingAdaptor { limiting, upstream }, base))
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> Py<PyMemoryResource> {
        self.upstream.clone_ref(py)
    }

    /// The budget, in bytes.
    #[getter]
    fn limit_bytes(&self) -> usize {
        self.limiting.limit_bytes()
    }

    /// Bytes allocated through the adaptor and not yet deallocated.
    #[getter]
    fn used_bytes(&self) -> usize {
        self.limiting.used_bytes()
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        let extra = format!(", limit_bytes={}", self.limiting.limit_bytes());
        adaptor_repr(py, "LimitingAdaptor", &self.upstream, &extra)
    }
}

/// Logs every call as a structured record on the `devmm.mr` logger
/// (attributes `op`, `ptr`, `nbytes`, `stream`, `device`, and `error` on failure).
#[pyclass(extends = PyMemoryResource, name = "LoggingAdaptor", module = "devmm")]
pub(crate) struct PyLoggingAdaptor {
    upstream: Py<PyMemoryResource>,
}

#[pymethods]
impl PyLoggingAdaptor {
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.upstream)
    }

    #[new]
    fn py_new(upstream: &Bound<'_, PyMemoryResource>) -> PyResult<(Self, PyMemoryResource)> {
        let (_, upstream, base) = adapt(upstream, devmm::LoggingAdaptor::new)?;
        Ok((PyLoggingAdaptor { upstream }, base))
    }

    /// The wrapped resource.
    #[getter]
    fn upstream(&self, py: Python<'_>) -> Py<PyMemoryResource> {
        self.upstream.clone_ref(py)
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        adaptor_repr(py, "LoggingAdaptor", &self.upstream, "")
    }
}

/// A resource made of two Python callables: `alloc_fn(nbytes, stream) -> int`
/// and `dealloc_fn(ptr, nbytes, stream)`. Pointers that break the promised
/// `alignment` are given back and reported as `ValueError`; a non-power-of-two
/// `alignment` is a `ValueError` and a NULL pointer for a non-empty request a
/// `MemoryError`. Pass `dereferenceable=True` when the pointers are real
/// memory of `device`; otherwise host copies and NumPy refuse them.
#[pyclass(extends = PyMemoryResource, weakref, name = "CallbackMemoryResource", module = "devmm")]
pub(crate) struct PyCallbackMemoryResource {
    /// The two callables, as the native resource's closures hold them.
    callables: [Arc<PythonRef>; 2],
    /// The native resource (the base class owns it), to tell whether
    /// anything else shares it.
    native: Weak<dyn devmm::MemoryResource>,
}

#[pymethods]
impl PyCallbackMemoryResource {
    #[new]
    #[pyo3(signature = (alloc_fn, dealloc_fn, device = None, alignment = Count::of(1), dereferenceable = false))]
    fn py_new(
        alloc_fn: &Bound<'_, PyAny>,
        dealloc_fn: &Bound<'_, PyAny>,
        device: Option<DeviceArg>,
        alignment: Count<Alignment>,
        dereferenceable: bool,
    ) -> PyResult<(Self, PyMemoryResource)> {
        let alignment = alignment.get();
        let device = device.map_or(devmm::Device::CPU, |d| d.0);
        let slots = [alloc_fn, dealloc_fn].map(|f| Arc::new(PythonRef::new(f.clone().unbind())));
        let (on_alloc, on_dealloc) = (Arc::clone(&slots[0]), Arc::clone(&slots[1]));
        let callables = Callables {
            name: "CallbackMemoryResource".into(),
            alloc_name: callable_name(alloc_fn),
            dealloc_name: callable_name(dealloc_fn),
            allocate: Box::new(move |py| on_alloc.get(py)),
            deallocate: Box::new(move |py| on_dealloc.get(py)),
        };
        let mr = python_resource(device, alignment, dereferenceable, callables).py()?;
        let native = Arc::downgrade(&mr);
        Ok((
            PyCallbackMemoryResource {
                callables: slots,
                native,
            },
            PyMemoryResource::native(mr),
        ))
    }

    /// The callables belong to the native resource; while this object is
    /// its only owner (no buffer or adaptor shares it), they are this
    /// object's to report, so a closure that refers back to the resource
    /// is a cycle the collector can free.
    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        if self.native.strong_count() == 1 {
            for callable in &self.callables {
                callable.traverse(&visit)?;
            }
        }
        Ok(())
    }

    fn __clear__(&self) {
        if self.native.strong_count() == 1 {
            self.callables.iter().for_each(|callable| callable.clear());
        }
    }
}
