//! Streams and the sentinels naming each runtime's built-in streams.

use std::hash::Hasher;
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyAttributeError, PyNotImplementedError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;

use crate::abstract_base::{abstract_base_new, AbstractBase};
use crate::count::{Count, Handle};
use crate::device::{DeviceArg, PyDevice};
use crate::error::{IntoPyResult, PythonException};
use crate::expected::expected;

/// A platform-independent name for a runtime's built-in stream:
/// `devmm.DEFAULT`, `devmm.LEGACY_DEFAULT` or `devmm.PER_THREAD_DEFAULT`.
/// Each runtime maps it to its own magic handle.
///
/// The three sentinels are module constants: not constructed (`TypeError`),
/// copied or pickled as themselves. Pass one wherever a stream is taken;
/// `DeviceRuntime.stream(device, sentinel)` resolves it.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> devmm.DEFAULT, devmm.DEFAULT is devmm.LEGACY_DEFAULT
/// (devmm.DEFAULT, False)
/// >>> devmm.runtime_for("cpu").stream("cpu", devmm.DEFAULT).handle
/// 0
///
/// ```
#[pyclass(frozen, eq, hash, name = "StreamSentinel", module = "devmm")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyStreamSentinel {
    pub(crate) inner: devmm::StreamSentinel,
}

#[pymethods]
impl PyStreamSentinel {
    fn __repr__(&self) -> String {
        format!("devmm.{}", self.inner.name())
    }

    /// Pickles as a reference to the module attribute, so unpickling
    /// yields the very sentinel object (identity, as the seed compares it).
    fn __reduce__(&self) -> &'static str {
        self.inner.name()
    }

    /// A sentinel is a singleton: copying returns it.
    fn __copy__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// A sentinel is a singleton: deep-copying returns it.
    fn __deepcopy__<'py>(slf: PyRef<'py, Self>, _memo: &Bound<'py, PyAny>) -> PyRef<'py, Self> {
        slf
    }
}

/// A stream on one device: an opaque native handle plus ordering.
/// devmm never launches work; streams are what allocation, release and
/// DLPack hand-off are ordered on.
///
/// The runtimes' streams are instances; it is also the abstract base of
/// streams written in Python, as the seed's `Stream(abc.ABC)`: a subclass
/// overrides the `handle` property, `synchronize()` and
/// `wait_raw(other_handle)` (instantiating one that does not is a
/// `TypeError`) and sets `self.device` when it is not the CPU. Such a
/// stream is accepted wherever a stream is; devmm reads its `device` and
/// `handle` when it is passed and calls its `synchronize` and `wait_raw`
/// when work ordered on it must be.
///
/// `handle` is the native handle (an int), `device` its `Device`; streams
/// compare equal when they name the same native stream. A stream of a
/// device other than the one an operation runs on is a `ValueError`, a
/// failed hand-off a `StreamError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> stream = devmm.runtime_for("cpu").default_stream("cpu")
/// >>> stream, stream.handle, stream.device
/// (Stream(device=cpu:0, handle=0x0), 0, Device(type=<DeviceType.CPU: 1>, index=0))
/// >>> class HostStream(devmm.Stream):  # a stream written in Python
/// ...     @property
/// ...     def handle(self):
/// ...         return 0
/// ...     def synchronize(self):
/// ...         pass
/// ...     def wait_raw(self, other_handle):
/// ...         pass
/// >>> HostStream()
/// HostStream(device=cpu:0, handle=0x0)
/// >>> devmm.Stream()
/// Traceback (most recent call last):
///     ...
/// TypeError: Can't instantiate abstract class Stream with abstract methods handle, synchronize, wait_raw; ...
///
/// ```
#[pyclass(subclass, frozen, weakref, name = "Stream", module = "devmm")]
#[derive(Debug)]
pub(crate) struct PyStream {
    /// A runtime's stream; `None` for a Python subclass, bridged on use.
    native: Option<devmm::Stream>,
    /// A Python subclass's `device` (the CPU until it sets one).
    device: Mutex<devmm::Device>,
}

impl From<devmm::Stream> for PyStream {
    fn from(inner: devmm::Stream) -> Self {
        PyStream {
            device: Mutex::new(inner.device()),
            native: Some(inner),
        }
    }
}

impl AbstractBase for PyStream {
    const ABSTRACT: &'static [&'static str] = &["handle", "synchronize", "wait_raw"];
    const HINT: &'static str =
        "a Python stream overrides the handle property, synchronize() and wait_raw(other_handle)";

    fn unbound() -> Self {
        PyStream {
            native: None,
            device: Mutex::new(devmm::Device::CPU),
        }
    }
}

/// Runs `f`, releasing the GIL when the stream's device has a driver behind
/// it; host (cpu) operations finish faster than a GIL hand-off.
pub(crate) fn maybe_detached<T: Send>(
    py: Python<'_>,
    device: devmm::Device,
    f: impl FnOnce() -> T + Send,
) -> T {
    if device.ty() == devmm::DeviceType::Cpu {
        f()
    } else {
        crate::gil::detach(py, f)
    }
}

/// The core stream `obj` (a `devmm.Stream`) stands for: a runtime's own,
/// or a bridge to a Python subclass's methods over the `device` and
/// `handle` it reports now.
pub(crate) fn stream_of(obj: &Bound<'_, PyAny>) -> PyResult<devmm::Stream> {
    let stream = obj
        .cast::<PyStream>()
        .map_err(|_| expected("a devmm.Stream", obj))?;
    if let Some(native) = &stream.get().native {
        return Ok(native.clone());
    }
    let (device, handle) = reported(obj)?;
    let ops = PythonStreamOps {
        name: obj.get_type().name()?.to_string(),
        obj: obj.clone().unbind(),
        device,
    };
    Ok(devmm::Stream::borrowed(device, handle, Arc::new(ops)))
}

/// The `device` and `handle` a Python subclass's stream reports now: all
/// its repr and `__cuda_stream__` need, so those work without its
/// platform's runtime loaded.
fn reported(obj: &Bound<'_, PyAny>) -> PyResult<(devmm::Device, usize)> {
    let py = obj.py();
    let DeviceArg(device) = obj.getattr(pyo3::intern!(py, "device"))?.extract()?;
    let handle: Count<Handle> = obj.getattr(pyo3::intern!(py, "handle"))?.extract()?;
    Ok((device, handle.get()))
}

/// A Python subclass's ordering methods, as a core stream's operations;
/// copies and exports on it go to the runtime serving its device, looked
/// up when one is first needed, so a Python stream orders a Python
/// resource's work on a device whose platform is not loaded.
struct PythonStreamOps {
    obj: Py<PyAny>,
    /// The subclass's name, for errors.
    name: String,
    /// The device the stream reported when bridged.
    device: devmm::Device,
}

impl PythonStreamOps {
    fn call(
        &self,
        device: devmm::Device,
        method: &str,
        producer: Option<usize>,
    ) -> devmm::Result<()> {
        crate::gil::attach(|py| {
            let obj = self.obj.bind(py);
            let called = obj.getattr(method).and_then(|m| match producer {
                Some(handle) => crate::gil::call(&m, (handle,), None),
                None => crate::gil::call(&m, (), None),
            });
            // The exception itself comes back out to the Python caller.
            called.map(drop).map_err(|err| {
                PythonException::raised(py, err, format!("{}.{method}", self.name), Some(device))
            })
        })
        .unwrap_or_else(|| {
            Err(devmm::Error::Stream {
                device,
                reason: format!(
                    "{}.{method} cannot run: the Python interpreter is shutting down",
                    self.name
                ),
            })
        })
    }
}

impl std::fmt::Debug for PythonStreamOps {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.name)
    }
}

impl devmm::StreamOps for PythonStreamOps {
    fn synchronize(&self, device: devmm::Device, _handle: usize) -> devmm::Result<()> {
        self.call(device, "synchronize", None)
    }

    fn wait(&self, device: devmm::Device, _consumer: usize, producer: usize) -> devmm::Result<()> {
        self.call(device, "wait_raw", Some(producer))
    }

    /// The Python object owns its native stream, if any.
    fn destroy(&self, _device: devmm::Device, _handle: usize) {}

    /// Asked for what only the device's runtime knows (a copy or an export
    /// on the stream, whether it is a default stream): the error says so.
    fn runtime(self: Arc<Self>) -> devmm::Result<Arc<dyn devmm::StreamRuntime>> {
        let runtime = devmm::runtime_for(self.device).map_err(|e| match e {
            devmm::Error::RuntimeUnavailable { name, reason } => devmm::Error::RuntimeUnavailable {
                name,
                reason: format!(
                    "{reason} (the {} stream on {} needs it: a copy or DLPack export on a \
                     stream, or asking whether it is a default stream, goes through its \
                     device's runtime)",
                    self.name, self.device
                ),
            },
            other => other,
        })?;
        Ok(runtime)
    }

    /// The Python object, for [`stream_object`].
    fn origin(&self) -> Option<&(dyn std::any::Any + Send + Sync)> {
        Some(&self.obj)
    }
}

/// The Python object for the core stream `stream`: the `devmm.Stream`
/// subclass instance it was made for, so Python code handed a stream back
/// (a resource's `allocate`, a recording's log) gets the caller's very
/// object, or a new `Stream` over a runtime's stream.
pub(crate) fn stream_object<'py>(
    py: Python<'py>,
    stream: &devmm::Stream,
) -> PyResult<Bound<'py, PyAny>> {
    match stream.origin().and_then(|o| o.downcast_ref::<Py<PyAny>>()) {
        Some(obj) => Ok(obj.bind(py).clone()),
        // The CPU has one stream: one object stands for it, so a resource
        // is handed the very stream its caller passed, as the seed's is.
        None if *stream == devmm::Stream::cpu() => {
            static CPU: PyOnceLock<Py<PyStream>> = PyOnceLock::new();
            let cpu =
                CPU.get_or_try_init(py, || Py::new(py, PyStream::from(devmm::Stream::cpu())))?;
            Ok(cpu.bind(py).clone().into_any())
        }
        None => Ok(Bound::new(py, PyStream::from(stream.clone()))?.into_any()),
    }
}

abstract_base_new!(
    /// The base of a Python stream (on `cpu:0` until `self.device` is
    /// set). Arguments belong to the subclass and are ignored here. A class
    /// that does not override `handle`, `synchronize` and `wait_raw` is
    /// abstract: instantiating it is a `TypeError`, as with `abc.ABC`.
    PyStream
);

#[pymethods]
impl PyStream {
    /// The native handle (`cudaStream_t`, `hipStream_t`; 0 on the CPU).
    #[getter]
    fn handle(&self) -> PyResult<usize> {
        Ok(self.native()?.handle())
    }

    /// The device the stream belongs to.
    #[getter]
    fn device(&self) -> PyDevice {
        match &self.native {
            Some(native) => native.device().into(),
            None => (*self.device.lock().unwrap_or_else(|e| e.into_inner())).into(),
        }
    }

    #[setter]
    fn set_device(&self, device: DeviceArg) -> PyResult<()> {
        if self.native.is_some() {
            return Err(PyAttributeError::new_err(
                "the device of a runtime's stream is fixed when it is made",
            ));
        }
        *self.device.lock().unwrap_or_else(|e| e.into_inner()) = device.0;
        Ok(())
    }

    /// Whether devmm destroys the native stream when the last reference goes.
    #[getter]
    fn owned(slf: &Bound<'_, Self>) -> PyResult<bool> {
        Ok(stream_of(slf.as_any())?.is_owned())
    }

    /// Whether this is one of its runtime's default streams (rmm's
    /// `Stream.is_default()`); the CPU's one stream is.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").default_stream("cpu").is_default()
    /// True
    ///
    /// ```
    fn is_default(slf: &Bound<'_, Self>) -> PyResult<bool> {
        stream_of(slf.as_any())?.is_default().py()
    }

    /// Blocks until all work queued on the stream has finished (GIL released).
    ///
    /// Raises `StreamError` when the driver reports a failure of the queued work.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").default_stream("cpu").synchronize()  # a no-op on the CPU
    ///
    /// ```
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let native = self.native()?;
        maybe_detached(py, native.device(), || native.synchronize()).py()
    }

    /// Makes this stream wait for the work queued so far on `other`.
    ///
    /// `other` is a `Stream` of the same device (a `ValueError` otherwise); a
    /// failed hand-off is a `StreamError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> runtime = devmm.runtime_for("cpu")
    /// >>> runtime.default_stream("cpu").wait(runtime.create_stream("cpu"))
    ///
    /// ```
    fn wait(slf: &Bound<'_, Self>, other: &Bound<'_, PyStream>) -> PyResult<()> {
        let (this, other) = (stream_of(slf.as_any())?, stream_of(other.as_any())?);
        maybe_detached(slf.py(), this.device(), || this.wait(&other)).py()
    }

    /// Makes this stream wait for the work queued so far on the native
    /// stream `other_handle` of the same device.
    ///
    /// `other_handle` is an int (a `cudaStream_t`/`hipStream_t` on GPUs); a
    /// failed hand-off is a `StreamError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.runtime_for("cpu").default_stream("cpu").wait_raw(0)
    ///
    /// ```
    fn wait_raw(&self, py: Python<'_>, other_handle: Count<Handle>) -> PyResult<()> {
        let (native, handle) = (self.native()?, other_handle.get());
        maybe_detached(py, native.device(), || native.wait_raw(handle)).py()
    }

    /// The CUDA stream protocol that cuda.core and CuPy read:
    /// `(0, handle)`, version 0 and the `cudaStream_t` as an int. Only CUDA
    /// streams speak it; on any other device it is an `AttributeError`.
    fn __cuda_stream__(slf: &Bound<'_, Self>) -> PyResult<(u32, usize)> {
        let (device, handle) = slf.get().device_and_handle(slf.as_any())?;
        devmm::Stream::cuda_stream_of(device, handle).ok_or_else(|| {
            PyAttributeError::new_err(format!(
                "a stream of {device} is not a CUDA stream: __cuda_stream__ is for CUDA streams only"
            ))
        })
    }

    /// Runtime streams are equal when they name the same native stream;
    /// Python streams are equal only to themselves.
    fn __eq__(slf: &Bound<'_, Self>, other: &Bound<'_, PyAny>) -> bool {
        match (&slf.get().native, other.cast::<PyStream>()) {
            (Some(a), Ok(b)) => b.get().native.as_ref() == Some(a),
            _ => slf.is(other),
        }
    }

    /// Consistent with `==`: runtime streams hash what names them, Python
    /// streams their identity.
    fn __hash__(slf: &Bound<'_, Self>) -> u64 {
        match &slf.get().native {
            Some(native) => {
                let mut hasher = std::hash::DefaultHasher::new();
                std::hash::Hash::hash(native, &mut hasher);
                hasher.finish()
            }
            None => slf.as_ptr() as u64,
        }
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let (device, handle) = slf.get().device_and_handle(slf.as_any())?;
        let name = match slf.get().native {
            Some(_) => "Stream".to_owned(),
            None => slf.get_type().name()?.to_string(),
        };
        Ok(format!("{name}(device={device}, handle={handle:#x})"))
    }
}

impl PyStream {
    /// The device and native handle of `obj` (this object): a runtime's
    /// stream's own, or what a Python subclass reports.
    fn device_and_handle(&self, obj: &Bound<'_, PyAny>) -> PyResult<(devmm::Device, usize)> {
        match &self.native {
            Some(native) => Ok((native.device(), native.handle())),
            None => reported(obj),
        }
    }

    /// The runtime stream; a Python subclass reaching the base's method has
    /// not overridden it.
    fn native(&self) -> PyResult<&devmm::Stream> {
        self.native.as_ref().ok_or_else(|| {
            PyNotImplementedError::new_err(
                "a Python stream overrides handle, synchronize and wait_raw",
            )
        })
    }
}

/// A stream argument: a `Stream`, a sentinel resolved on the device, or
/// `None` for the device's default stream.
///
/// Python type: `Stream | StreamSentinel | None`
#[derive(Clone, Debug)]
pub(crate) enum StreamArg {
    /// A concrete stream.
    Stream(devmm::Stream),
    /// A sentinel for the device's runtime to map.
    Sentinel(devmm::StreamSentinel),
}

impl<'py> FromPyObject<'_, 'py> for StreamArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if obj.cast::<PyStream>().is_ok() {
            return stream_of(&obj).map(StreamArg::Stream);
        }
        if let Ok(sentinel) = obj.cast::<PyStreamSentinel>() {
            return Ok(StreamArg::Sentinel(sentinel.get().inner));
        }
        Err(expected(
            "a devmm.Stream, a stream sentinel (devmm.DEFAULT, ...) or None",
            &obj,
        ))
    }
}

/// A stream argument that keeps its `Stream` object: a buffer allocated on
/// it hands back that very object as its `stream`, as the seed's attribute
/// does (a sentinel is resolved on the device and not kept).
///
/// Python type: `Stream | StreamSentinel | None`
pub(crate) struct KeptStreamArg {
    /// The stream named, as every stream argument reads it.
    pub(crate) arg: StreamArg,
    /// The `Stream` object passed, if it was one.
    pub(crate) obj: Option<Py<PyAny>>,
}

impl KeptStreamArg {
    /// The stream argument and the object to keep, of an optional argument.
    pub(crate) fn split(kept: Option<KeptStreamArg>) -> (Option<StreamArg>, Option<Py<PyAny>>) {
        match kept {
            Some(KeptStreamArg { arg, obj }) => (Some(arg), obj),
            None => (None, None),
        }
    }
}

impl<'py> FromPyObject<'_, 'py> for KeptStreamArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let arg = obj.extract::<StreamArg>()?;
        let kept = matches!(arg, StreamArg::Stream(_)).then(|| obj.to_owned().unbind());
        Ok(KeptStreamArg { arg, obj: kept })
    }
}

/// The stream `arg` names on `device` (the default stream when `None`).
/// A stream of another device is a `ValueError`: work on `device` cannot be
/// ordered on it.
pub(crate) fn resolve_stream(
    arg: Option<StreamArg>,
    device: devmm::Device,
) -> PyResult<devmm::Stream> {
    let which = match arg {
        Some(StreamArg::Stream(stream)) => {
            return stream.check_device(device).py().map(|()| stream);
        }
        Some(StreamArg::Sentinel(which)) => Some(which),
        None => None,
    };
    devmm::runtime::stream_for(device, which).py()
}

/// Stream creation flags: a `devmm.StreamFlags` (rmm's `CudaStreamFlags`,
/// an `IntEnum` defined in Python) or its int value, checked by the core.
///
/// Python type: `int`
pub(crate) struct StreamFlagsArg(devmm::StreamFlags);

impl<'py> FromPyObject<'_, 'py> for StreamFlagsArg {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        let code: i64 = obj.extract()?;
        devmm::StreamFlags::try_from(code).py().map(StreamFlagsArg)
    }
}

/// A thread-safe pool of streams on one device, as rmm's `CudaStreamPool`:
/// `get_stream()` hands them out round-robin (successive calls may return
/// the same stream), `get_stream(id)` by index.
///
/// `StreamPool(pool_size=16, flags=None, *, device=None)`: `flags` is a
/// `StreamFlags` or its int, `device` a `Device`, a string or `None`.
///
/// Raises `ValueError` for an empty pool or unknown flags, and
/// `RuntimeUnavailableError` when the device's runtime is absent.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> pool = devmm.StreamPool(4, devmm.StreamFlags.NON_BLOCKING, device="cpu")
/// >>> pool.get_pool_size(), pool.get_stream()
/// (4, Stream(device=cpu:0, handle=0x0))
/// >>> devmm.StreamPool(0, device="cpu")
/// Traceback (most recent call last):
///     ...
/// ValueError: invalid argument: a stream pool on cpu:0 needs at least one stream; pass size >= 1
///
/// ```
#[pyclass(frozen, name = "StreamPool", module = "devmm")]
pub(crate) struct PyStreamPool {
    inner: devmm::StreamPool,
}

#[pymethods]
impl PyStreamPool {
    /// `pool_size` streams with `flags` (`StreamFlags.SYNC_DEFAULT` when
    /// `None`) on `device` (the default device when `None`).
    #[new]
    #[pyo3(signature = (pool_size = 16, flags = None, *, device = None))]
    fn py_new(
        py: Python<'_>,
        pool_size: usize,
        flags: Option<StreamFlagsArg>,
        device: Option<DeviceArg>,
    ) -> PyResult<Self> {
        let device = DeviceArg::or_default(device)?;
        let flags = flags.map(|StreamFlagsArg(f)| f).unwrap_or_default();
        let inner = maybe_detached(py, device, || {
            devmm::StreamPool::new(device, pool_size, flags)
        })
        .py()?;
        Ok(PyStreamPool { inner })
    }

    /// The number of streams in the pool.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.StreamPool(device="cpu").get_pool_size()
    /// 16
    ///
    /// ```
    fn get_pool_size(&self) -> usize {
        self.inner.pool_size()
    }

    /// Stream `stream_id`, or the next one when `None`.
    ///
    /// Python type: `Stream`
    ///
    /// An id past the pool is a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> pool = devmm.StreamPool(2, device="cpu")
    /// >>> pool.get_stream(1)
    /// Stream(device=cpu:0, handle=0x0)
    /// >>> pool.get_stream(7)
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: invalid argument: stream id 7 is out of range for a pool of 2 streams; pass 0..2
    ///
    /// ```
    #[pyo3(signature = (stream_id = None))]
    fn get_stream<'py>(
        &self,
        py: Python<'py>,
        stream_id: Option<usize>,
    ) -> PyResult<Bound<'py, PyAny>> {
        stream_object(py, &self.inner.get_stream(stream_id).py()?)
    }
}
