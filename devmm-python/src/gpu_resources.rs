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
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{shipped_new, PyMemoryResource};

/// Completes `slf`, a driver resource class's instance, with the resource
/// `make` builds on `device` (`default`, its kind's first device, when
/// `None`), behind a ledger like every resource Python makes. The driver
/// is loaded without the GIL.
fn driver_init<R: devmm::MemoryResource + 'static>(
    slf: &Bound<'_, PyMemoryResource>,
    device: Option<DeviceArg>,
    default: devmm::Device,
    make: impl FnOnce(devmm::Device) -> devmm::Result<R> + Send,
) -> PyResult<()> {
    let device = device.map_or(default, |d| d.0);
    let mr = slf.py().detach(|| make(device)).py()?;
    PyMemoryResource::install(slf, PyMemoryResource::checked(mr))
}

/// The seed's repr of a runtime resource: its class's name, its device and
/// whether it allocates stream-ordered (`async_alloc`).
fn runtime_repr(obj: &Bound<'_, PyAny>) -> PyResult<String> {
    let py = obj.py();
    Ok(format!(
        "{}(device={}, async_alloc={})",
        obj.get_type().name()?,
        obj.getattr(intern!(py, "device"))?.str()?,
        obj.getattr(intern!(py, "stream_ordered"))?.repr()?
    ))
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
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaRuntimeMemoryResource", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyCudaRuntimeMemoryResource;

shipped_new!(PyCudaRuntimeMemoryResource);

#[pymethods]
impl PyCudaRuntimeMemoryResource {
    /// A resource on `device` (`cuda:0` when `None`); `async_alloc` picks
    /// the allocator: `"auto"` the stream-ordered one where the driver has
    /// it, `True` that one (a `ValueError` where it is missing), `False`
    /// `cudaMalloc`.
    #[pyo3(signature = (device = None, *, async_alloc = AsyncAlloc(None)))]
    #[pyo3(text_signature = "($self, device=None, *, async_alloc='auto')")]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        async_alloc: AsyncAlloc,
    ) -> PyResult<()> {
        let default = CudaRuntimeMemoryResource::default_device();
        driver_init(slf.as_super(), device, default, |device| {
            CudaRuntimeMemoryResource::with_async_alloc(device, async_alloc.0)
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        runtime_repr(slf.as_any())
    }
}

/// Page-locked host memory from `cudaMallocHost`, on a `cuda_host` device.
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaPinnedMemoryResource", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyCudaPinnedMemoryResource;

shipped_new!(PyCudaPinnedMemoryResource);

#[pymethods]
impl PyCudaPinnedMemoryResource {
    /// A resource on `device` (`cuda_host:0` when `None`).
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        driver_init(
            slf.as_super(),
            device,
            CudaPinnedMemoryResource::default_device(),
            CudaPinnedMemoryResource::new,
        )
    }
}

/// CUDA managed (unified) memory from `cudaMallocManaged`, on a `cuda_managed` device.
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaManagedMemoryResource", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyCudaManagedMemoryResource;

shipped_new!(PyCudaManagedMemoryResource);

#[pymethods]
impl PyCudaManagedMemoryResource {
    /// A resource on `device` (`cuda_managed:0` when `None`).
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        driver_init(
            slf.as_super(),
            device,
            CudaManagedMemoryResource::default_device(),
            CudaManagedMemoryResource::new,
        )
    }
}

/// ROCm device memory: `hipMallocAsync` (stream-ordered) where HIP has it, `hipMalloc` otherwise.
#[pyclass(extends = PyMemoryResource, subclass, name = "HipRuntimeMemoryResource", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyHipRuntimeMemoryResource;

shipped_new!(PyHipRuntimeMemoryResource);

#[pymethods]
impl PyHipRuntimeMemoryResource {
    /// A resource on `device` (`rocm:0` when `None`); `async_alloc` as for
    /// `CudaRuntimeMemoryResource` (`False`: `hipMalloc`).
    #[pyo3(signature = (device = None, *, async_alloc = AsyncAlloc(None)))]
    #[pyo3(text_signature = "($self, device=None, *, async_alloc='auto')")]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        async_alloc: AsyncAlloc,
    ) -> PyResult<()> {
        let default = HipRuntimeMemoryResource::default_device();
        driver_init(slf.as_super(), device, default, |device| {
            HipRuntimeMemoryResource::with_async_alloc(device, async_alloc.0)
        })
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        runtime_repr(slf.as_any())
    }
}

/// Page-locked host memory from `hipHostMalloc`, on a `rocm_host` device.
#[pyclass(extends = PyMemoryResource, subclass, name = "HipPinnedMemoryResource", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyHipPinnedMemoryResource;

shipped_new!(PyHipPinnedMemoryResource);

#[pymethods]
impl PyHipPinnedMemoryResource {
    /// A resource on `device` (`rocm_host:0` when `None`).
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        driver_init(
            slf.as_super(),
            device,
            HipPinnedMemoryResource::default_device(),
            HipPinnedMemoryResource::new,
        )
    }
}

/// HIP managed memory from `hipMallocManaged`.
#[pyclass(extends = PyMemoryResource, subclass, name = "HipManagedMemoryResource", module = "devmm")]
#[derive(Default)]
pub(crate) struct PyHipManagedMemoryResource;

shipped_new!(PyHipManagedMemoryResource);

#[pymethods]
impl PyHipManagedMemoryResource {
    /// A resource on `device` (`rocm:0` when `None`).
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        driver_init(
            slf.as_super(),
            device,
            HipManagedMemoryResource::default_device(),
            HipManagedMemoryResource::new,
        )
    }
}
