//! The GPU resources of `devmm.mrs.cuda` and `devmm.mrs.rocm`: the core's
//! driver-backed resources. Making one loads the platform's runtime, so it
//! raises `RuntimeUnavailableError` (an `ImportError`) where the driver is
//! missing; the driver calls run without the GIL.

use std::sync::{Arc, OnceLock};

use devmm::mrs::cuda::{
    CudaAsyncMemoryResource, CudaManagedMemoryResource, CudaPinnedMemoryResource,
    CudaRuntimeMemoryResource, PoolOptions,
};
use devmm::mrs::rocm::{
    HipAsyncMemoryResource, HipManagedMemoryResource, HipPinnedMemoryResource,
    HipRuntimeMemoryResource,
};
use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::PyBool;

use crate::count::{Count, InitialPoolSize, KeepBytes, MaxPoolSize, ReleaseThreshold};
use crate::device::DeviceArg;
use crate::error::IntoPyResult;
use crate::resource::{built, shipped_new, PyMemoryResource};

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
    let mr = crate::gil::detach(slf.py(), || make(device)).py()?;
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

/// Writes the pool methods of a resource over a pool of its own, a device
/// pool or the pinned resources' host pool, in a `#[pymethods]` block of
/// its own (PyO3's `multiple-pymethods`): `pool_methods!(PyFoo);` for a
/// class whose `pool` holds the core resource. The stub generator expands
/// an invocation as it reads the block.
macro_rules! pool_methods {
    ($ty:ident) => {
        #[pymethods]
        impl $ty {
            /// The pool's figures from the driver: reserved and used bytes
            /// with their high-water marks (a freed block counts as used
            /// until its free is reached on its stream). A pinned
            /// resource's host pool counts the freed blocks it keeps pinned
            /// as reserved; a pinned resource without one (`uses_host_pool`
            /// is false) raises `ValueError`.
            ///
            /// Python type: `devmm.statistics.PoolStatistics`
            ///
            /// Returns a `devmm.statistics.PoolStatistics`.
            ///
            /// Examples
            /// --------
            ///
            /// Every pool resource has it; `CudaAsyncMemoryResource` here:
            ///
            /// ```python
            /// >>> import devmm
            /// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
            /// >>> try:
            /// ...     pool = CudaAsyncMemoryResource("cuda:0")
            /// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
            /// ...     pool = None
            /// >>> buf = devmm.DeviceBuffer(1 << 20, mr=pool)  # doctest: +SKIP
            /// >>> pool.pool_statistics().used_bytes >= 1 << 20  # doctest: +SKIP
            /// True
            ///
            /// ```
            fn pool_statistics<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
                pool_figures(py, &**built(&self.pool)?)
            }

            /// Resets both high-water marks to the current figures (a
            /// pinned resource without a host pool has none: nothing to do).
            /// Raises `ValueError` for a ROCm pool with `max_pool_size`: HIP
            /// checks that limit against the reserved mark, which its reset
            /// makes 0, so the pool could grow past it.
            ///
            /// Examples
            /// --------
            ///
            /// ```python
            /// >>> import devmm
            /// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
            /// >>> try:
            /// ...     pool = CudaAsyncMemoryResource("cuda:0")
            /// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
            /// ...     pool = None
            /// >>> pool.reset_pool_high_water()  # doctest: +SKIP
            /// >>> stats = pool.pool_statistics()  # doctest: +SKIP
            /// >>> stats.used_high_bytes == stats.used_bytes  # doctest: +SKIP
            /// True
            ///
            /// ```
            fn reset_pool_high_water(&self, py: Python<'_>) -> PyResult<()> {
                let mr = built(&self.pool)?;
                crate::gil::detach(py, || mr.reset_pool_high_water()).py()
            }

            /// Hands unused memory back until `keep_bytes` stay reserved
            /// (never memory that live blocks use): a device pool's to the
            /// device, a host pool's unpinned. A pool keeps freed blocks for
            /// the next allocation until this hands them back (as PyTorch
            /// empties its caches); a block freed on a stream is unused once
            /// its free is reached there: synchronize first to trim it too.
            /// A pinned resource without a host pool keeps nothing, and this
            /// does nothing.
            ///
            /// `keep_bytes` is an int (a negative one is a `ValueError`).
            ///
            /// Examples
            /// --------
            ///
            /// ```python
            /// >>> import devmm
            /// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
            /// >>> try:
            /// ...     pool = CudaAsyncMemoryResource("cuda:0")
            /// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
            /// ...     pool = None
            /// >>> pool.trim(0)  # doctest: +SKIP
            /// >>> pool.pool_statistics().fragmentation_bytes  # doctest: +SKIP
            /// 0
            ///
            /// ```
            #[pyo3(signature = (keep_bytes = Count::of(0)))]
            #[pyo3(text_signature = "($self, keep_bytes=0)")]
            fn trim(&self, py: Python<'_>, keep_bytes: Count<KeepBytes>) -> PyResult<()> {
                let mr = built(&self.pool)?;
                crate::gil::detach(py, || mr.trim(keep_bytes.get())).py()
            }
        }
    };
}

/// CUDA device memory: `cudaMallocAsync` (stream-ordered) where the runtime has it, `cudaMalloc` otherwise.
///
/// `CudaRuntimeMemoryResource(device=None, *, async_alloc="auto")`: `device` is a `Device` or a string.
/// `async_alloc` is `"auto"`, `True` or `False` (anything else a
/// `ValueError`).
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cuda import CudaRuntimeMemoryResource
/// >>> try:
/// ...     mr = CudaRuntimeMemoryResource("cuda:0")
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> CudaRuntimeMemoryResource("cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: CudaRuntimeMemoryResource serves cuda devices, not cpu:0; pass a cuda device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaRuntimeMemoryResource", module = "devmm.mrs.cuda")]
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

/// Page-locked host memory on a `cuda_host` device: stream-ordered from a pool of pinned host memory where the runtime has one (CUDA 12.2 on), else from `cudaMallocHost`.
///
/// `uses_host_pool` says which.
///
/// `CudaPinnedMemoryResource(device=None)`: `device` is a `Device` or a string. (`cuda_host:0` when `None`)
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cuda import CudaPinnedMemoryResource
/// >>> try:
/// ...     mr = CudaPinnedMemoryResource("cuda_host:0")
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> CudaPinnedMemoryResource("cuda:0")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: CudaPinnedMemoryResource serves cuda_host devices, not cuda:0; pass a cuda_host device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaPinnedMemoryResource", module = "devmm.mrs.cuda")]
#[derive(Default)]
pub(crate) struct PyCudaPinnedMemoryResource {
    pool: OnceLock<Arc<CudaPinnedMemoryResource>>,
}

shipped_new!(PyCudaPinnedMemoryResource);
pool_methods!(PyCudaPinnedMemoryResource);

#[pymethods]
impl PyCudaPinnedMemoryResource {
    /// A resource on `device` (`cuda_host:0` when `None`).
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        pool_init(
            slf,
            |s| &s.pool,
            device,
            CudaPinnedMemoryResource::default_device(),
            CudaPinnedMemoryResource::new,
        )
    }

    /// Whether the memory comes from a stream-ordered pool of pinned host memory the resource made (`cudaMemPoolCreate` with a host location, CUDA 12.2 on) rather than `cudaMallocHost`: then allocation and release are ordered on the stream passed, as `stream_ordered` says.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> from devmm.mrs.cuda import CudaPinnedMemoryResource
    /// >>> try:
    /// ...     mr = CudaPinnedMemoryResource("cuda_host:0")
    /// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
    /// ...     mr = None
    /// >>> mr is None or mr.uses_host_pool == mr.stream_ordered
    /// True
    ///
    /// ```
    #[getter]
    fn uses_host_pool(slf: &Bound<'_, Self>) -> bool {
        slf.as_super().borrow().stream_ordered()
    }
}

/// CUDA managed (unified) memory from `cudaMallocManaged`, on a `cuda_managed` device.
///
/// `CudaManagedMemoryResource(device=None)`: `device` is a `Device` or a string. (`cuda_managed:0` when `None`)
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cuda import CudaManagedMemoryResource
/// >>> try:
/// ...     mr = CudaManagedMemoryResource("cuda_managed:0")
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> CudaManagedMemoryResource("cuda:0")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: CudaManagedMemoryResource serves cuda_managed devices, not cuda:0; pass a cuda_managed device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaManagedMemoryResource", module = "devmm.mrs.cuda")]
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
///
/// `HipRuntimeMemoryResource(device=None, *, async_alloc="auto")`: `device` is a `Device` or a string. (`rocm:0` when `None`); `async_alloc` is as for
/// `CudaRuntimeMemoryResource`.
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.rocm import HipRuntimeMemoryResource
/// >>> try:
/// ...     mr = HipRuntimeMemoryResource("rocm:0")
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> HipRuntimeMemoryResource("cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: HipRuntimeMemoryResource serves rocm devices, not cpu:0; pass a rocm device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "HipRuntimeMemoryResource", module = "devmm.mrs.rocm")]
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
///
/// `HipPinnedMemoryResource(device=None)`: `device` is a `Device` or a string. (`rocm_host:0` when `None`)
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.rocm import HipPinnedMemoryResource
/// >>> try:
/// ...     mr = HipPinnedMemoryResource("rocm_host:0")
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> HipPinnedMemoryResource("rocm:0")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: HipPinnedMemoryResource serves rocm_host devices, not rocm:0; pass a rocm_host device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "HipPinnedMemoryResource", module = "devmm.mrs.rocm")]
#[derive(Default)]
pub(crate) struct PyHipPinnedMemoryResource {
    pool: OnceLock<Arc<HipPinnedMemoryResource>>,
}

shipped_new!(PyHipPinnedMemoryResource);
pool_methods!(PyHipPinnedMemoryResource);

#[pymethods]
impl PyHipPinnedMemoryResource {
    /// A resource on `device` (`rocm_host:0` when `None`).
    #[pyo3(signature = (device = None))]
    fn __init__(slf: &Bound<'_, Self>, device: Option<DeviceArg>) -> PyResult<()> {
        pool_init(
            slf,
            |s| &s.pool,
            device,
            HipPinnedMemoryResource::default_device(),
            HipPinnedMemoryResource::new,
        )
    }

    /// Whether the memory comes from a stream-ordered pool of pinned host memory: never on ROCm, whose pools take device locations only, so `hipHostMalloc` serves it (the property, `pool_statistics`, `reset_pool_high_water` and `trim` are there to match `CudaPinnedMemoryResource`: without a pool there are no figures, a `ValueError`, and nothing to reset or trim).
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> from devmm.mrs.rocm import HipPinnedMemoryResource
    /// >>> try:
    /// ...     mr = HipPinnedMemoryResource("rocm_host:0")
    /// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
    /// ...     mr = None
    /// >>> mr is None or mr.uses_host_pool is False
    /// True
    ///
    /// ```
    #[getter]
    fn uses_host_pool(slf: &Bound<'_, Self>) -> bool {
        slf.as_super().borrow().stream_ordered()
    }
}

/// HIP managed memory from `hipMallocManaged`.
///
/// `HipManagedMemoryResource(device=None)`: `device` is a `Device` or a string. (`rocm:0` when `None`)
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.rocm import HipManagedMemoryResource
/// >>> try:
/// ...     mr = HipManagedMemoryResource("rocm:0")
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> HipManagedMemoryResource("cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: HipManagedMemoryResource serves rocm devices, not cpu:0; pass a rocm device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "HipManagedMemoryResource", module = "devmm.mrs.rocm")]
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

/// The keyword arguments of the pool resources' constructors, as the core's
/// options (every size already checked non-negative by [`Count`]).
fn pool_options(
    initial_pool_size: Option<Count<InitialPoolSize>>,
    release_threshold: Option<Count<ReleaseThreshold>>,
    max_pool_size: Option<Count<MaxPoolSize>>,
    enable_ipc: bool,
    peer_access: Vec<DeviceArg>,
) -> PoolOptions {
    PoolOptions {
        initial_pool_size: initial_pool_size.map(|n| n.get()),
        // `usize` is at most 64 bits on every platform devmm builds for.
        release_threshold: release_threshold.map(|n| n.get() as u64),
        max_pool_size: max_pool_size.map(|n| n.get()),
        enable_ipc,
        peer_access: peer_access.into_iter().map(|d| d.0).collect(),
    }
}

/// Completes `slf`, a pool resource class's instance, with the resource
/// `make` builds on `device` (`default` when `None`), kept in `state` for
/// the pool methods; the pool is made without the GIL.
fn pool_init<S: pyo3::PyClass<BaseType = PyMemoryResource>, R>(
    slf: &Bound<'_, S>,
    state: impl FnOnce(&S) -> &OnceLock<Arc<R>>,
    device: Option<DeviceArg>,
    default: devmm::Device,
    make: impl FnOnce(devmm::Device) -> devmm::Result<R> + Send,
) -> PyResult<()>
where
    R: devmm::MemoryResource + Send + Sync + 'static,
{
    let device = device.map_or(default, |d| d.0);
    let mr = Arc::new(crate::gil::detach(slf.py(), || make(device)).py()?);
    let base = PyMemoryResource::checked(Arc::clone(&mr));
    PyMemoryResource::install(slf.as_super(), base)?;
    // `install` refused a second `__init__`, so the state is empty here.
    let _ = state(&slf.borrow()).set(mr);
    Ok(())
}

/// A pool resource's figures, read without the GIL, as a
/// `devmm.statistics.PoolStatistics`.
fn pool_figures<'py>(
    py: Python<'py>,
    mr: &(dyn devmm::MemoryResource + Sync),
) -> PyResult<Bound<'py, PyAny>> {
    let figures = crate::gil::detach(py, || mr.pool_statistics().transpose()).py()?;
    match figures {
        Some(figures) => crate::pool_statistics::pool_statistics_object(py, &figures),
        None => Err(PyValueError::new_err(format!(
            "{mr:?} has no pool of its own"
        ))),
    }
}

/// The repr of a pool resource: its class, device and the settings given.
fn pool_repr(obj: &Bound<'_, PyAny>, options: &PoolOptions) -> PyResult<String> {
    let py = obj.py();
    let mut text = format!(
        "{}(device={}",
        obj.get_type().name()?,
        obj.getattr(intern!(py, "device"))?.str()?
    );
    let sizes = [
        (
            "initial_pool_size",
            options.initial_pool_size.map(|n| n as u64),
        ),
        ("release_threshold", options.release_threshold),
        ("max_pool_size", options.max_pool_size.map(|n| n as u64)),
    ];
    for (name, value) in sizes {
        if let Some(value) = value {
            text.push_str(&format!(", {name}={value}"));
        }
    }
    if options.enable_ipc {
        text.push_str(", enable_ipc=True");
    }
    text.push(')');
    Ok(text)
}

/// Stream-ordered CUDA device memory from a pool of its own (`cudaMemPoolCreate`, `cudaMallocFromPoolAsync`), named as rmm's.
///
/// `CudaAsyncMemoryResource(device=None, *, initial_pool_size=None, release_threshold=None, max_pool_size=None, enable_ipc=False, peer_access=())`: `device` is a `Device` or a string. (`cuda:0` when `None`); the sizes are ints in bytes or `None`;
/// `peer_access` is a sequence of devices. `pool_statistics()` reads the
/// pool's figures.
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
/// >>> try:
/// ...     mr = CudaAsyncMemoryResource("cuda:0", initial_pool_size=1 << 20)
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> CudaAsyncMemoryResource("cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: CudaAsyncMemoryResource serves cuda devices, not cpu:0; pass a cuda device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "CudaAsyncMemoryResource", module = "devmm.mrs.cuda")]
#[derive(Default)]
pub(crate) struct PyCudaAsyncMemoryResource {
    pool: OnceLock<Arc<CudaAsyncMemoryResource>>,
}

shipped_new!(PyCudaAsyncMemoryResource);
pool_methods!(PyCudaAsyncMemoryResource);

#[pymethods]
impl PyCudaAsyncMemoryResource {
    /// A pool on `device` (`cuda:0` when `None`), as rmm's
    /// `CudaAsyncMemoryResource`: `initial_pool_size` bytes reserved at once,
    /// `release_threshold` bytes of unused memory kept at synchronization
    /// (the device's total memory when `None`), never more than
    /// `max_pool_size` reserved, exportable to other processes with
    /// `enable_ipc`; `peer_access` lists other devices given read-write
    /// access. A negative size is a `ValueError`, and so is an initial size
    /// above the maximum.
    #[pyo3(signature = (device = None, *, initial_pool_size = None, release_threshold = None, max_pool_size = None, enable_ipc = false, peer_access = Vec::new()))]
    #[pyo3(
        text_signature = "($self, device=None, *, initial_pool_size=None, release_threshold=None, max_pool_size=None, enable_ipc=False, peer_access=())"
    )]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        initial_pool_size: Option<Count<InitialPoolSize>>,
        release_threshold: Option<Count<ReleaseThreshold>>,
        max_pool_size: Option<Count<MaxPoolSize>>,
        enable_ipc: bool,
        peer_access: Vec<DeviceArg>,
    ) -> PyResult<()> {
        let options = pool_options(
            initial_pool_size,
            release_threshold,
            max_pool_size,
            enable_ipc,
            peer_access,
        );
        let default = CudaAsyncMemoryResource::default_device();
        pool_init(
            slf,
            |s| &s.pool,
            device,
            default,
            |device| CudaAsyncMemoryResource::new(device, options),
        )
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let options = built(&slf.borrow().pool)?.options().clone();
        pool_repr(slf.as_any(), &options)
    }
}

/// Stream-ordered ROCm device memory from a pool of its own (`hipMemPoolCreate`, `hipMallocFromPoolAsync`).
///
/// `HipAsyncMemoryResource(device=None, *, initial_pool_size=None, release_threshold=None, max_pool_size=None, enable_ipc=False, peer_access=())`: `device` is a `Device` or a string. (`rocm:0` when `None`); the arguments are as for
/// `CudaAsyncMemoryResource`.
///
/// Raises `RuntimeUnavailableError` (an `ImportError`) where the runtime
/// library or a device is missing, and `ValueError` for a device of another
/// kind.
///
/// Examples
/// --------
///
/// A GPU is needed to allocate; the example runs without one too:
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.rocm import HipAsyncMemoryResource
/// >>> try:
/// ...     mr = HipAsyncMemoryResource("rocm:0", initial_pool_size=1 << 20)
/// ... except devmm.RuntimeUnavailableError:  # no runtime or device here
/// ...     mr = None
/// >>> HipAsyncMemoryResource("cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: HipAsyncMemoryResource serves rocm devices, not cpu:0; pass a rocm device
/// >>> ptr = mr.allocate(1 << 20, devmm.DEFAULT)  # doctest: +SKIP
/// >>> mr.deallocate(ptr, 1 << 20, devmm.DEFAULT)  # doctest: +SKIP
///
/// ```
#[pyclass(extends = PyMemoryResource, subclass, name = "HipAsyncMemoryResource", module = "devmm.mrs.rocm")]
#[derive(Default)]
pub(crate) struct PyHipAsyncMemoryResource {
    pool: OnceLock<Arc<HipAsyncMemoryResource>>,
}

shipped_new!(PyHipAsyncMemoryResource);
pool_methods!(PyHipAsyncMemoryResource);

#[pymethods]
impl PyHipAsyncMemoryResource {
    /// A pool on `device` (`rocm:0` when `None`); the settings as for
    /// `CudaAsyncMemoryResource`, except that `max_pool_size` is a
    /// `ValueError` on HIP before 6.2, whose pools ignore the limit.
    #[pyo3(signature = (device = None, *, initial_pool_size = None, release_threshold = None, max_pool_size = None, enable_ipc = false, peer_access = Vec::new()))]
    #[pyo3(
        text_signature = "($self, device=None, *, initial_pool_size=None, release_threshold=None, max_pool_size=None, enable_ipc=False, peer_access=())"
    )]
    fn __init__(
        slf: &Bound<'_, Self>,
        device: Option<DeviceArg>,
        initial_pool_size: Option<Count<InitialPoolSize>>,
        release_threshold: Option<Count<ReleaseThreshold>>,
        max_pool_size: Option<Count<MaxPoolSize>>,
        enable_ipc: bool,
        peer_access: Vec<DeviceArg>,
    ) -> PyResult<()> {
        let options = pool_options(
            initial_pool_size,
            release_threshold,
            max_pool_size,
            enable_ipc,
            peer_access,
        );
        let default = HipAsyncMemoryResource::default_device();
        pool_init(
            slf,
            |s| &s.pool,
            device,
            default,
            |device| HipAsyncMemoryResource::new(device, options),
        )
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let options = built(&slf.borrow().pool)?.options().clone();
        pool_repr(slf.as_any(), &options)
    }
}
