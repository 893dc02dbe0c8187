//! Runtimes: one per platform, found by name, device or device type.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::PyTypeError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyFrozenSet, PyInt, PyString, PyTuple};

use crate::count::{ConsumerHandle, Count, Dst, Handle, Nbytes, Src};
use crate::device::{type_of_code, DeviceArg, PyDevice, PyDeviceType};
use crate::error::IntoPyResult;
use crate::resource::PyMemoryResource;
use crate::shipped::default_object_of;
use crate::stream::{maybe_detached, stream_object, stream_of, PyStream, PyStreamSentinel};

/// One platform's runtime: devices, memory information, streams.
///
/// Not constructed directly: `devmm.runtime_for(device)` returns the one
/// object per runtime (`TypeError` otherwise). A `device` argument of its
/// methods is a `Device` or a string (`"cpu"`, `"cuda:1"`); a device the
/// runtime does not serve is a `ValueError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> runtime = devmm.runtime_for("cpu")
/// >>> runtime, runtime.name, runtime.device_types
/// (DeviceRuntime(name="cpu"), 'cpu', frozenset({<DeviceType.CPU: 1>}))
/// >>> runtime.devices()
/// [Device(type=<DeviceType.CPU: 1>, index=0)]
///
/// ```
#[pyclass(frozen, weakref, name = "DeviceRuntime", module = "devmm")]
pub(crate) struct PyDeviceRuntime {
    inner: Arc<dyn devmm::DeviceRuntime>,
}

#[pymethods]
impl PyDeviceRuntime {
    /// `"cpu"`, `"cuda"`, `"rocm"`, or a third party's name.
    #[getter]
    fn name(&self) -> &str {
        self.inner.name()
    }

    /// The device types the runtime serves.
    ///
    /// Python type: `frozenset[DeviceType]`
    #[getter]
    fn device_types<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyFrozenSet>> {
        let types = self.inner.device_types().iter();
        PyFrozenSet::new(py, types.map(|&t| PyDeviceType::from(t)))
    }

    /// The devices of the primary type.
    ///
    /// Returns a list of `Device`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").devices()
    /// [Device(type=<DeviceType.CPU: 1>, index=0)]
    ///
    /// ```
    fn devices(&self) -> PyResult<Vec<PyDevice>> {
        Ok(self
            .inner
            .devices()
            .py()?
            .into_iter()
            .map(PyDevice::from)
            .collect())
    }

    /// How many devices of `device_type` the runtime serves (0 for a type
    /// it does not serve); of its primary type when `None`.
    ///
    /// `device_type` is a `DeviceType` or `None`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> cpu = devmm.runtime_for("cpu")
    /// >>> cpu.device_count(), cpu.device_count(devmm.DeviceType.CUDA)
    /// (1, 0)
    ///
    /// ```
    #[pyo3(signature = (device_type = None))]
    fn device_count(&self, device_type: Option<PyDeviceType>) -> PyResult<usize> {
        match device_type {
            Some(ty) => self.inner.device_count_of(ty.into()).py(),
            None => self.inner.device_count().py(),
        }
    }

    /// The resource the registry adopts for `device` when none was set: a
    /// new one each call (`MallocMemoryResource` on the CPU).
    ///
    /// `device` is a `Device` or a string; one the runtime does not serve is a
    /// `ValueError`, a driver that cannot make one a `RuntimeUnavailableError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").default_memory_resource("cpu")
    /// MallocMemoryResource(device=cpu:0, alignment=64)
    ///
    /// ```
    fn default_memory_resource(
        &self,
        py: Python<'_>,
        device: DeviceArg,
    ) -> PyResult<Py<PyMemoryResource>> {
        let mr = maybe_detached(py, device.0, || self.inner.default_resource(device.0)).py()?;
        default_object_of(py, &mr)
    }

    /// Makes the native stream `consumer_handle` of the producer's device
    /// wait for the work queued so far on `producer` (an event on GPUs; on
    /// the CPU, host work is done when a call returns, so any handle has
    /// nothing to wait for): the `__dlpack__(stream=)` hand-off.
    ///
    /// Raises `StreamError` when the driver cannot record or wait on the event.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> runtime = devmm.runtime_for("cpu")
    /// >>> producer = runtime.default_stream("cpu")
    /// >>> runtime.make_stream_wait(0, producer)  # consumer handle 0: the CPU's stream
    ///
    /// ```
    fn make_stream_wait(
        &self,
        py: Python<'_>,
        consumer_handle: Count<ConsumerHandle>,
        producer: &Bound<'_, PyStream>,
    ) -> PyResult<()> {
        let producer = stream_of(producer.as_any())?;
        maybe_detached(py, producer.device(), || {
            self.inner
                .make_stream_wait(consumer_handle.get(), &producer)
        })
        .py()
    }

    /// Copies `nbytes` from address `src` to address `dst` in the direction
    /// `kind` (a `CopyKind`) names, on `stream`, one of this runtime's. A
    /// copy touching host memory is done when this returns; one between
    /// device addresses is ordered on `stream`. The CPU copies host to host
    /// only; `CopyKind.DEFAULT` lets a GPU driver tell the memory apart. Like
    /// ctypes, it trusts the addresses it is given.
    ///
    /// `dst`, `src` and `nbytes` are ints, `kind` a `CopyKind` (or its code),
    /// `stream` a `Stream` of this runtime. A direction the runtime cannot copy
    /// is a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import numpy as np
    /// >>> import devmm
    /// >>> runtime = devmm.runtime_for("cpu")
    /// >>> src, dst = np.arange(4, dtype=np.uint8), np.zeros(4, dtype=np.uint8)
    /// >>> runtime.memcpy(dst.ctypes.data, src.ctypes.data, 4, devmm.CopyKind.HOST_TO_HOST,
    /// ...                runtime.default_stream("cpu"))
    /// >>> dst
    /// array([0, 1, 2, 3], dtype=uint8)
    /// >>> runtime.memcpy(dst.ctypes.data, src.ctypes.data, 4, devmm.CopyKind.HOST_TO_DEVICE,
    /// ...                runtime.default_stream("cpu"))
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: invalid argument: the cpu runtime copies host to host only, not HOST_TO_DEVICE; pass HOST_TO_HOST
    ///
    /// ```
    fn memcpy(
        &self,
        py: Python<'_>,
        dst: Count<Dst>,
        src: Count<Src>,
        nbytes: Count<Nbytes>,
        kind: CopyKindArg,
        stream: &Bound<'_, PyStream>,
    ) -> PyResult<()> {
        let stream = stream_of(stream.as_any())?;
        let (dst, src) = (
            devmm::DevicePtr::from_addr(dst.get()),
            devmm::DevicePtr::from_addr(src.get()),
        );
        maybe_detached(py, stream.device(), || {
            // SAFETY: the caller vouches for both addresses, as ctypes'
            // `memmove` callers do (the seed's CPU runtime is that call).
            unsafe { self.inner.memcpy(dst, src, nbytes.get(), kind.0, &stream) }
        })
        .py()
    }

    /// A context manager that makes `device` the thread's active device
    /// inside its `with` block and restores the previous one after. A
    /// device the runtime does not serve is refused now, as the seed's.
    ///
    /// `device` is a `Device` or a string. `with device:` does the same.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> runtime = devmm.runtime_for("cpu")
    /// >>> with runtime.activate_device("cpu"):
    /// ...     pass
    /// >>> runtime.activate_device("cuda:0")
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: invalid argument: the cpu runtime serves cpu devices and has only cpu:0, not cuda:0; pass cpu:0
    ///
    /// ```
    fn activate_device(&self, device: DeviceArg) -> PyResult<PyActivation> {
        // The runtime's own device check, without a driver call: its
        // default stream is a handle it names.
        self.inner.default_stream(device.0).py()?;
        Ok(PyActivation {
            runtime: Arc::clone(&self.inner),
            device: device.0,
            guards: Vec::new(),
        })
    }

    /// `(free, total)` bytes of `device`.
    ///
    /// `device` is a `Device` or a string. Returns a tuple of two ints.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> free, total = devmm.runtime_for("cpu").memory_info("cpu")
    /// >>> 0 < free <= total
    /// True
    ///
    /// ```
    fn memory_info(&self, py: Python<'_>, device: DeviceArg) -> PyResult<(usize, usize)> {
        let info = maybe_detached(py, device.0, || self.inner.memory_info(device.0)).py()?;
        Ok((info.free, info.total))
    }

    /// The built-in stream `which` (a sentinel) of `device`.
    ///
    /// Python type: `Stream`
    ///
    /// `which` is `devmm.DEFAULT`, `LEGACY_DEFAULT` or `PER_THREAD_DEFAULT`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").stream("cpu", devmm.PER_THREAD_DEFAULT)
    /// Stream(device=cpu:0, handle=0x0)
    ///
    /// ```
    fn stream<'py>(
        &self,
        py: Python<'py>,
        device: DeviceArg,
        which: &PyStreamSentinel,
    ) -> PyResult<Bound<'py, PyAny>> {
        stream_object(py, &self.inner.stream(device.0, which.inner).py()?)
    }

    /// The default stream of `device` (on the CPU, its one stream: the
    /// same object every time).
    ///
    /// Python type: `Stream`
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> stream = devmm.runtime_for("cpu").default_stream("cpu")
    /// >>> stream, stream.is_default()
    /// (Stream(device=cpu:0, handle=0x0), True)
    ///
    /// ```
    fn default_stream<'py>(
        &self,
        py: Python<'py>,
        device: DeviceArg,
    ) -> PyResult<Bound<'py, PyAny>> {
        stream_object(py, &self.inner.default_stream(device.0).py()?)
    }

    /// A new stream on `device`, destroyed when the last reference goes
    /// (on the CPU, its one stream).
    ///
    /// Python type: `Stream`
    ///
    /// Raises `RuntimeUnavailableError` or `StreamError` when the driver cannot
    /// make one.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").create_stream("cpu")
    /// Stream(device=cpu:0, handle=0x0)
    ///
    /// ```
    fn create_stream<'py>(
        &self,
        py: Python<'py>,
        device: DeviceArg,
    ) -> PyResult<Bound<'py, PyAny>> {
        let stream = maybe_detached(py, device.0, || self.inner.create_stream(device.0)).py()?;
        stream_object(py, &stream)
    }

    /// A stream of `device` for `obj`: a native handle (an int) the caller
    /// keeps alive, a sentinel (`DEFAULT`, ...: the platform's own
    /// handle), an object with `__cuda_stream__` (cuda.core, CuPy, rmm; a
    /// `TypeError` on a ROCm device, where a CUDA handle names nothing), or
    /// a `Stream` of `device`, returned as it is.
    ///
    /// Python type: `Stream`
    ///
    /// Any other object is a `TypeError`; a handle the runtime refuses or a
    /// stream of another device a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> runtime = devmm.runtime_for("cpu")
    /// >>> runtime.wrap_stream("cpu", 0), runtime.wrap_stream("cpu", devmm.DEFAULT).handle
    /// (Stream(device=cpu:0, handle=0x0), 0)
    /// >>> runtime.wrap_stream("cpu", "stream")
    /// Traceback (most recent call last):
    ///     ...
    /// TypeError: expected an int stream handle, a sentinel, an object with __cuda_stream__, or a devmm.Stream, got str
    ///
    /// ```
    fn wrap_stream<'py>(
        &self,
        device: DeviceArg,
        obj: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let py = obj.py();
        if obj.cast::<PyStream>().is_ok() {
            stream_of(obj)?.check_device(device.0).py()?;
            return Ok(obj.clone());
        }
        if let Ok(sentinel) = obj.cast::<PyStreamSentinel>() {
            return stream_object(py, &self.inner.stream(device.0, sentinel.get().inner).py()?);
        }
        let handle: Count<Handle> = match obj.getattr_opt(intern!(py, "__cuda_stream__"))? {
            Some(protocol) if devmm::Stream::takes_cuda_stream_protocol(device.0) => {
                protocol.call0()?.extract::<(u32, Count<Handle>)>()?.1
            }
            Some(_) => {
                return Err(PyTypeError::new_err(format!(
                    "__cuda_stream__ names a CUDA stream, and {} is a ROCm device; \
                     pass a HIP stream handle or a devmm.Stream",
                    device.0
                )))
            }
            None if obj.is_instance_of::<PyInt>() => obj.extract()?,
            None => {
                let what = "an int stream handle, a sentinel, an object with __cuda_stream__, \
                            or a devmm.Stream";
                return Err(crate::expected::expected(what, obj));
            }
        };
        stream_object(py, &self.inner.wrap_stream(device.0, handle.get()).py()?)
    }

    fn __repr__(&self) -> String {
        format!("DeviceRuntime(name={:?})", self.inner.name())
    }
}

/// What `DeviceRuntime.activate_device` returns: entering activates the
/// device, leaving restores the previous one (blocks may nest).
#[pyclass(unsendable, name = "DeviceActivation", module = "devmm._devmm")]
pub(crate) struct PyActivation {
    runtime: Arc<dyn devmm::DeviceRuntime>,
    device: devmm::Device,
    /// One guard per `with` block entered and not yet left.
    guards: Vec<devmm::runtime::ActivationGuard>,
}

#[pymethods]
impl PyActivation {
    fn __enter__(&mut self) -> PyResult<()> {
        let guard = self.runtime.activate(self.device).py()?;
        self.guards.push(guard);
        Ok(())
    }

    /// Restores the device active before the matching `__enter__`.
    ///
    /// Python type: `bool`
    fn __exit__(
        &mut self,
        _exc_type: &Bound<'_, PyAny>,
        _exc: &Bound<'_, PyAny>,
        _traceback: &Bound<'_, PyAny>,
    ) -> bool {
        self.guards.pop();
        false
    }
}

/// A copy's direction: a `devmm.CopyKind` or its `cudaMemcpyKind` code.
///
/// Python type: `int`
pub(crate) struct CopyKindArg(devmm::CopyKind);

impl<'py> FromPyObject<'_, 'py> for CopyKindArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let code: i64 = obj.extract()?;
        devmm::CopyKind::try_from(code).py().map(CopyKindArg)
    }
}

/// What `runtime_for` accepts, looked up as it is read: a device, a device
/// type or its DLPack code (the seed compares the value with each
/// runtime's types), or a device string or runtime name.
///
/// Python type: `Device | DeviceType | int | str`
pub(crate) struct RuntimeArg(Arc<dyn devmm::DeviceRuntime>);

impl<'py> FromPyObject<'_, 'py> for RuntimeArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let runtime = if let Some(device) = PyDevice::read(&obj)? {
            devmm::runtime_for(device)
        } else if let Ok(ty) = obj.extract::<PyDeviceType>() {
            devmm::runtime_for(devmm::DeviceType::from(ty))
        } else if obj.is_exact_instance_of::<PyInt>() {
            devmm::runtime_for(type_of_code(obj.extract()?)?)
        } else if let Ok(name) = obj.cast::<PyString>() {
            devmm::runtime_for(&*name.to_cow()?)
        } else {
            let what = "a devmm.Device, a devmm.DeviceType, its DLPack code or a name";
            return Err(crate::expected::expected(what, &obj));
        };
        Ok(RuntimeArg(runtime.py()?))
    }
}

/// The runtime for a device, a device type or a name; loaded on first use
/// and the same object afterwards. Raises `RuntimeUnavailableError` (an
/// `ImportError`) when none serves it.
#[pyfunction]
pub(crate) fn runtime_for(py: Python<'_>, device: RuntimeArg) -> PyResult<Py<PyDeviceRuntime>> {
    wrapper(py, device.0)
}

/// Every runtime that can run a device here, loaded (of those
/// `runtime_names()` lists, in its order), each the object `runtime_for`
/// returns for it. A runtime whose library loads but finds no device (a
/// HIP runtime without AMD's kernel driver, say) is left out, as `devmm
/// info` reports it unavailable with its reason.
///
/// Python type: `tuple[DeviceRuntime, ...]`
#[pyfunction]
pub(crate) fn available_runtimes(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    let runtimes = devmm::available_runtimes().py()?.into_iter();
    PyTuple::new(
        py,
        runtimes
            .map(|runtime| wrapper(py, runtime))
            .collect::<PyResult<Vec<_>>>()?,
    )
}

/// The one Python object for `runtime`, so identity checks hold.
fn wrapper(
    py: Python<'_>,
    runtime: Arc<dyn devmm::DeviceRuntime>,
) -> PyResult<Py<PyDeviceRuntime>> {
    static WRAPPERS: std::sync::OnceLock<Mutex<HashMap<String, Py<PyDeviceRuntime>>>> =
        std::sync::OnceLock::new();
    let mut wrappers = WRAPPERS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = wrappers.get(runtime.name()) {
        return Ok(existing.clone_ref(py));
    }
    let name = runtime.name().to_owned();
    let wrapper = Py::new(py, PyDeviceRuntime { inner: runtime })?;
    wrappers.insert(name, wrapper.clone_ref(py));
    Ok(wrapper)
}

/// The runtimes whose platform is present, found by probing only (no
/// driver is loaded). `DEVMM_RUNTIME` restricts the list to `cpu` and the
/// runtime it names, listed without probing (forced, as the seed's).
///
/// Python type: `tuple[str, ...]`
#[pyfunction]
pub(crate) fn runtime_names(py: Python<'_>) -> PyResult<Bound<'_, PyTuple>> {
    PyTuple::new(py, devmm::runtime_names())
}

/// The device `empty` uses when none is given: `cpu:0`, or device 0 of the
/// runtime `DEVMM_RUNTIME` names.
///
/// Returns a `Device`; a `DEVMM_RUNTIME` naming a runtime that cannot run
/// here is a `RuntimeUnavailableError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> devmm.default_device()  # with DEVMM_RUNTIME unset
/// Device(type=<DeviceType.CPU: 1>, index=0)
///
/// ```
#[pyfunction]
pub(crate) fn default_device() -> PyResult<PyDevice> {
    Ok(devmm::default_device().py()?.into())
}

/// The core's check of a runtime an entry point made
/// (`devmm::runtime::check_runtime_plugin`): registered under its own name
/// and serving at least one device type, else a `ValueError`.
#[pyfunction]
pub(crate) fn _check_runtime_plugin(
    registered_as: &str,
    name: &str,
    device_types: Vec<PyDeviceType>,
) -> PyResult<()> {
    let types: Vec<devmm::DeviceType> = device_types.into_iter().map(|t| t.0).collect();
    devmm::runtime::check_runtime_plugin(registered_as, name, &types).py()
}

/// Names the third-party runtimes the package found (its `devmm.runtimes`
/// entry points) to the core's discovery, in place of those named before,
/// and returns why any was refused (a built-in runtime's name), then checks
/// `DEVMM_RUNTIME` against every runtime known: a value naming none fails
/// the import with `RuntimeUnavailableError`, not the first allocation.
#[pyfunction]
pub(crate) fn _register_external_runtimes(names: Vec<String>) -> PyResult<Vec<(String, String)>> {
    let refused = devmm::runtime::set_external_runtimes(&names)
        .into_iter()
        .map(|(name, err)| (name, err.to_string()))
        .collect();
    devmm::runtime::check_runtime_override().py()?;
    Ok(refused)
}
