//! The GPU resources of `devmm.mrs.cuda` and `devmm.mrs.rocm`: the core's
//! driver-backed resources. Making one loads the platform's runtime, so it
//! raises `RuntimeUnavailableError` (an `ImportError`) where the driver is
//! missing; the driver calls run without the GIL.

use devmm::mrs::cuda::{
    CudaManagedMemoryResource, CudaPinnedMemoryResource, CudaRuntimeMemoryResource,
};
use devmm::mrs::rocm::{
    HipManagedMemoryResource, HipPinnedMemoryResource, HipRuntimeMemoryResource,
};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::PyMemoryResource;

/// The base part of a driver resource class's instance: the resource `make`
/// builds on `device` (or the platform's first device of the kind,
/// `default`), behind a ledger like every resource Python makes. The driver
/// is loaded without the GIL.
fn driver_resource<R: devmm::MemoryResource + 'static>(
    py: Python<'_>,
    device: Option<DeviceArg>,
    default: &str,
    make: impl FnOnce(devmm::Device) -> devmm::Result<R> + Send,
) -> PyResult<PyMemoryResource> {
    let device = match device {
        Some(device) => device.0,
        None => default.parse().py()?,
    };
    Ok(PyMemoryResource::checked(py.detach(|| make(device)).py()?))
}

/// The seed's `async_alloc=` of the runtime resources: `"auto"`, `True` or
/// `False`, as the core's `Option<bool>` (`None` for `"auto"`).
///
/// Python type: `bool | str`
pub(crate) struct AsyncAlloc(Option<bool>);

impl<'py> FromPyObject<'_, 'py> for AsyncAlloc {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(flag) = obj.cast::<PyBool>() {
            return Ok(AsyncAlloc(Some(flag.is_true())));
        }
        match obj.extract::<&str>() {
            Ok("auto") => Ok(AsyncAlloc(None)),
            _ => Err(PyValueError::new_err(format!(
                "async_alloc must be 'auto', True or False, not {}",
                obj.repr()?
            ))),
        }
    }
}

/// CUDA device memory: `cudaMallocAsync` (stream-ordered) where the runtime has it, `cudaMalloc` otherwise.
#[pyclass(extends = PyMemoryResource, name = "CudaRuntimeMemoryResource", module = "devmm")]
pub(crate) struct PyCudaRuntimeMemoryResource;

#[pymethods]
impl PyCudaRuntimeMemoryResource {
    /// A resource on `device` (`cuda:0` when `None`); `async_alloc` picks
    /// the allocator: `"auto"` the stream-ordered one where the driver has
    /// it, `True` that one (a `ValueError` where it is missing), `False`
    /// `cudaMalloc`.
    #[new]
    #[pyo3(signature = (device = None, *, async_alloc = AsyncAlloc(None)))]
    #[pyo3(text_signature = "(device=None, *, async_alloc='auto')")]
    fn py_new(
        py: Python<'_>,
        device: Option<DeviceArg>,
        async_alloc: AsyncAlloc,
    ) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "cuda:0", |device| {
            CudaRuntimeMemoryResource::with_async_alloc(device, async_alloc.0)
        })
        .map(|base| (Self, base))
    }
}

/// Page-locked host memory from `cudaMallocHost`, on a `cuda_host` device.
#[pyclass(extends = PyMemoryResource, name = "CudaPinnedMemoryResource", module = "devmm")]
pub(crate) struct PyCudaPinnedMemoryResource;

#[pymethods]
impl PyCudaPinnedMemoryResource {
    /// A resource on `device` (`cuda_host:0` when `None`).
    #[new]
    #[pyo3(signature = (device = None))]
    fn py_new(py: Python<'_>, device: Option<DeviceArg>) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "cuda_host:0", CudaPinnedMemoryResource::new)
            .map(|base| (Self, base))
    }
}

/// CUDA managed (unified) memory from `cudaMallocManaged`, on a `cuda_managed` device.
#[pyclass(extends = PyMemoryResource, name = "CudaManagedMemoryResource", module = "devmm")]
pub(crate) struct PyCudaManagedMemoryResource;

#[pymethods]
impl PyCudaManagedMemoryResource {
    /// A resource on `device` (`cuda_managed:0` when `None`).
    #[new]
    #[pyo3(signature = (device = None))]
    fn py_new(py: Python<'_>, device: Option<DeviceArg>) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "cuda_managed:0", CudaManagedMemoryResource::new)
            .map(|base| (Self, base))
    }
}

/// ROCm device memory: `hipMallocAsync` (stream-ordered) where HIP has it, `hipMalloc` otherwise.
#[pyclass(extends = PyMemoryResource, name = "HipRuntimeMemoryResource", module = "devmm")]
pub(crate) struct PyHipRuntimeMemoryResource;

#[pymethods]
impl PyHipRuntimeMemoryResource {
    /// A resource on `device` (`rocm:0` when `None`); `async_alloc` as for
    /// `CudaRuntimeMemoryResource` (`False`: `hipMalloc`).
    #[new]
    #[pyo3(signature = (device = None, *, async_alloc = AsyncAlloc(None)))]
    #[pyo3(text_signature = "(device=None, *, async_alloc='auto')")]
    fn py_new(
        py: Python<'_>,
        device: Option<DeviceArg>,
        async_alloc: AsyncAlloc,
    ) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "rocm:0", |device| {
            HipRuntimeMemoryResource::with_async_alloc(device, async_alloc.0)
        })
        .map(|base| (Self, base))
    }
}

/// Page-locked host memory from `hipHostMalloc`, on a `rocm_host` device.
#[pyclass(extends = PyMemoryResource, name = "HipPinnedMemoryResource", module = "devmm")]
pub(crate) struct PyHipPinnedMemoryResource;

#[pymethods]
impl PyHipPinnedMemoryResource {
    /// A resource on `device` (`rocm_host:0` when `None`).
    #[new]
    #[pyo3(signature = (device = None))]
    fn py_new(py: Python<'_>, device: Option<DeviceArg>) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "rocm_host:0", HipPinnedMemoryResource::new)
            .map(|base| (Self, base))
    }
}

/// HIP managed memory from `hipMallocManaged`.
#[pyclass(extends = PyMemoryResource, name = "HipManagedMemoryResource", module = "devmm")]
pub(crate) struct PyHipManagedMemoryResource;

#[pymethods]
impl PyHipManagedMemoryResource {
    /// A resource on `device` (`rocm:0` when `None`).
    #[new]
    #[pyo3(signature = (device = None))]
    fn py_new(py: Python<'_>, device: Option<DeviceArg>) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "rocm:0", HipManagedMemoryResource::new)
            .map(|base| (Self, base))
    }
}
