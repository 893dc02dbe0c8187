//! The GPU resources of `devmm.mrs.cuda` and `devmm.mrs.rocm`: the core's
//! driver-backed resources. Making one loads the platform's runtime, so it
//! raises `RuntimeUnavailableError` (an `ImportError`) where the driver is
//! missing; the driver calls run without the GIL.

use pyo3::prelude::*;

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::PyMemoryResource;

/// The device argument, or the platform's first device of the kind.
fn device_or(device: Option<DeviceArg>, default: &str) -> PyResult<devmm::Device> {
    match device {
        Some(device) => Ok(device.0),
        None => default.parse().py(),
    }
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
        let device = device_or(device, "cuda:0")?;
        let mr = py
            .detach(|| devmm::mrs::cuda::CudaRuntimeMemoryResource::new(device))
            .py()?;
        Ok((PyCudaRuntimeMemoryResource, PyMemoryResource::checked(mr)))
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
        let device = device_or(device, "cuda_host:0")?;
        let mr = py
            .detach(|| devmm::mrs::cuda::CudaPinnedMemoryResource::new(device))
            .py()?;
        Ok((PyCudaPinnedMemoryResource, PyMemoryResource::checked(mr)))
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
        let device = device_or(device, "cuda_managed:0")?;
        let mr = py
            .detach(|| devmm::mrs::cuda::CudaManagedMemoryResource::new(device))
            .py()?;
        Ok((PyCudaManagedMemoryResource, PyMemoryResource::checked(mr)))
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
        let device = device_or(device, "rocm:0")?;
        let mr = py
            .detach(|| devmm::mrs::rocm::HipRuntimeMemoryResource::new(device))
            .py()?;
        Ok((PyHipRuntimeMemoryResource, PyMemoryResource::checked(mr)))
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
        let device = device_or(device, "rocm_host:0")?;
        let mr = py
            .detach(|| devmm::mrs::rocm::HipPinnedMemoryResource::new(device))
            .py()?;
        Ok((PyHipPinnedMemoryResource, PyMemoryResource::checked(mr)))
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
        let device = device_or(device, "rocm:0")?;
        let mr = py
            .detach(|| devmm::mrs::rocm::HipManagedMemoryResource::new(device))
            .py()?;
        Ok((PyHipManagedMemoryResource, PyMemoryResource::checked(mr)))
    }
}
