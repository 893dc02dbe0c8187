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
use pyo3::prelude::*;

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

/// CUDA device memory: `cudaMallocAsync` (stream-ordered) where the runtime has it, `cudaMalloc` otherwise.
#[pyclass(extends = PyMemoryResource, name = "CudaRuntimeMemoryResource", module = "devmm")]
pub(crate) struct PyCudaRuntimeMemoryResource;

#[pymethods]
impl PyCudaRuntimeMemoryResource {
    /// A resource on `device` (`cuda:0` when `None`).
    #[new]
    #[pyo3(signature = (device = None))]
    fn py_new(py: Python<'_>, device: Option<DeviceArg>) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "cuda:0", CudaRuntimeMemoryResource::new)
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
    /// A resource on `device` (`rocm:0` when `None`).
    #[new]
    #[pyo3(signature = (device = None))]
    fn py_new(py: Python<'_>, device: Option<DeviceArg>) -> PyResult<(Self, PyMemoryResource)> {
        driver_resource(py, device, "rocm:0", HipRuntimeMemoryResource::new)
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
