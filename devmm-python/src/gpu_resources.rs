//! The GPU resources of `devmm.mrs.cuda` and `devmm.mrs.rocm`: the core's
//! driver-backed resources. Making one loads the platform's runtime, so it
//! raises `RuntimeUnavailableError` (an `ImportError`) where the driver is
//! missing; the driver calls run without the GIL.

use devmm::mrs::{cuda, rocm};
use pyo3::prelude::*;

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::PyMemoryResource;

/// The base part of a driver resource made by `make` on `device` (or the
/// platform's first device of the kind, `default`), behind a ledger like
/// every resource Python makes. The driver is loaded without the GIL.
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
        let base = driver_resource(py, device, "cuda:0", cuda::CudaRuntimeMemoryResource::new)?;
        Ok((PyCudaRuntimeMemoryResource, base))
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
        let base = driver_resource(
            py,
            device,
            "cuda_host:0",
            cuda::CudaPinnedMemoryResource::new,
        )?;
        Ok((PyCudaPinnedMemoryResource, base))
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
        let base = driver_resource(
            py,
            device,
            "cuda_managed:0",
            cuda::CudaManagedMemoryResource::new,
        )?;
        Ok((PyCudaManagedMemoryResource, base))
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
        let base = driver_resource(py, device, "rocm:0", rocm::HipRuntimeMemoryResource::new)?;
        Ok((PyHipRuntimeMemoryResource, base))
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
        let base = driver_resource(
            py,
            device,
            "rocm_host:0",
            rocm::HipPinnedMemoryResource::new,
        )?;
        Ok((PyHipPinnedMemoryResource, base))
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
        let base = driver_resource(py, device, "rocm:0", rocm::HipManagedMemoryResource::new)?;
        Ok((PyHipManagedMemoryResource, base))
    }
}
