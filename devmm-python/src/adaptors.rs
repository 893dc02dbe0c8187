//! The adaptors and the callback resource: native resources composed over
//! any resource, Python-defined ones included. Each holds its upstream
//! Python object, so the whole chain lives as long as the adaptor.

use std::sync::Arc;

use pyo3::prelude::*;

use crate::count::{Alignment, Count, LimitBytes};
use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{python_resource, resource_of, PyMemoryResource};

type Upstream = Arc<dyn devmm::MemoryResource>;

fn adaptor_repr(
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
fn adapt<A: devmm::MemoryResource + 'static>(
    upstream: &Bound<'_, PyMemoryResource>,
    make: impl FnOnce(Upstream) -> A,
) -> PyResult<(Arc<A>, Py<PyMemoryResource>, PyMemoryResource)> {
    let adaptor = Arc::new(make(resource_of(upstream)?));
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
/// `MemoryError`.
#[pyclass(extends = PyMemoryResource, name = "CallbackMemoryResource", module = "devmm")]
pub(crate) struct PyCallbackMemoryResource;

#[pymethods]
impl PyCallbackMemoryResource {
    #[new]
    #[pyo3(signature = (alloc_fn, dealloc_fn, device = None, alignment = Count::of(1)))]
    fn py_new(
        alloc_fn: Py<PyAny>,
        dealloc_fn: Py<PyAny>,
        device: Option<DeviceArg>,
        alignment: Count<Alignment>,
    ) -> PyResult<(Self, PyMemoryResource)> {
        let alignment = alignment.get();
        let device = device.map_or(devmm::Device::CPU, |d| d.0);
        let mr = python_resource(device, alignment, alloc_fn, dealloc_fn).py()?;
        Ok((PyCallbackMemoryResource, PyMemoryResource::native(mr)))
    }
}
