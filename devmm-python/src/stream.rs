//! Streams and the sentinels naming each runtime's built-in streams.

use pyo3::exceptions::{PyAttributeError, PyValueError};
use pyo3::prelude::*;

use crate::count::{Count, Handle};
use crate::device::PyDevice;
use crate::error::IntoPyResult;

/// A platform-independent name for a runtime's built-in stream:
/// `devmm.DEFAULT`, `devmm.LEGACY_DEFAULT` or `devmm.PER_THREAD_DEFAULT`.
/// Each runtime maps it to its own magic handle.
#[pyclass(frozen, eq, hash, name = "StreamSentinel", module = "devmm")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct PyStreamSentinel {
    pub(crate) inner: devmm::StreamSentinel,
}

impl PyStreamSentinel {
    /// The sentinel's name in the `devmm` module.
    fn name(&self) -> &'static str {
        match self.inner {
            devmm::StreamSentinel::Default => "DEFAULT",
            devmm::StreamSentinel::LegacyDefault => "LEGACY_DEFAULT",
            devmm::StreamSentinel::PerThreadDefault => "PER_THREAD_DEFAULT",
        }
    }
}

#[pymethods]
impl PyStreamSentinel {
    fn __repr__(&self) -> String {
        format!("devmm.{}", self.name())
    }

    /// Pickles as a reference to the module attribute, so unpickling
    /// yields the very sentinel object (identity, as the seed compares it).
    fn __reduce__(&self) -> &'static str {
        self.name()
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
#[pyclass(frozen, eq, name = "Stream", module = "devmm")]
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct PyStream {
    pub(crate) inner: devmm::Stream,
}

impl From<devmm::Stream> for PyStream {
    fn from(inner: devmm::Stream) -> Self {
        PyStream { inner }
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
        py.detach(f)
    }
}

#[pymethods]
impl PyStream {
    /// The native handle (`cudaStream_t`, `hipStream_t`; 0 on the CPU).
    #[getter]
    fn handle(&self) -> usize {
        self.inner.handle()
    }

    /// The device the stream belongs to.
    #[getter]
    fn device(&self) -> PyDevice {
        self.inner.device().into()
    }

    /// Whether devmm destroys the native stream when the last reference goes.
    #[getter]
    fn owned(&self) -> bool {
        self.inner.is_owned()
    }

    /// Whether this is one of its runtime's default streams (rmm's
    /// `Stream.is_default()`); the CPU's one stream is.
    fn is_default(&self) -> PyResult<bool> {
        self.inner.is_default().py()
    }

    /// Blocks until all work queued on the stream has finished (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        maybe_detached(py, self.inner.device(), || self.inner.synchronize()).py()
    }

    /// Makes this stream wait for the work queued so far on `other`.
    fn wait(&self, py: Python<'_>, other: &PyStream) -> PyResult<()> {
        maybe_detached(py, self.inner.device(), || self.inner.wait(&other.inner)).py()
    }

    /// Makes this stream wait for the work queued so far on the native
    /// stream `handle` of the same device.
    fn wait_raw(&self, py: Python<'_>, handle: Count<Handle>) -> PyResult<()> {
        let handle = handle.get();
        maybe_detached(py, self.inner.device(), || self.inner.wait_raw(handle)).py()
    }

    /// The CUDA stream protocol that cuda.core and CuPy read:
    /// `(0, handle)`, version 0 and the `cudaStream_t` as an int. Only CUDA
    /// streams speak it; on any other device it is an `AttributeError`.
    fn __cuda_stream__(&self) -> PyResult<(u32, usize)> {
        match self.inner.device().ty() {
            devmm::DeviceType::Cuda | devmm::DeviceType::CudaManaged => {
                Ok((0, self.inner.handle()))
            }
            _ => Err(PyAttributeError::new_err(format!(
                "a stream of {} is not a CUDA stream: __cuda_stream__ is for CUDA streams only",
                self.inner.device()
            ))),
        }
    }

    fn __repr__(&self) -> String {
        format!(
            "Stream(device={}, handle={:#x})",
            self.inner.device(),
            self.inner.handle()
        )
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
        if let Ok(stream) = obj.cast::<PyStream>() {
            return Ok(StreamArg::Stream(stream.get().inner.clone()));
        }
        if let Ok(sentinel) = obj.cast::<PyStreamSentinel>() {
            return Ok(StreamArg::Sentinel(sentinel.get().inner));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "expected a devmm.Stream, a stream sentinel (devmm.DEFAULT, ...) or None, got {}",
            obj.get_type().name()?
        )))
    }
}

/// The stream `arg` names on `device` (the default stream when `None`).
/// A stream of another device is a `ValueError`: work on `device` cannot be
/// ordered on it.
pub(crate) fn resolve_stream(
    arg: Option<StreamArg>,
    device: devmm::Device,
) -> PyResult<devmm::Stream> {
    match arg {
        Some(StreamArg::Stream(stream)) if stream.device() != device => {
            Err(PyValueError::new_err(format!(
                "the stream is on {}, but the memory is on {device}; pass a stream of {device}",
                stream.device()
            )))
        }
        Some(StreamArg::Stream(stream)) => Ok(stream),
        None if device == devmm::Device::CPU => Ok(devmm::Stream::cpu()),
        None => devmm::runtime_for(device)
            .and_then(|rt| rt.default_stream(device))
            .py(),
        Some(StreamArg::Sentinel(which)) => devmm::runtime_for(device)
            .and_then(|rt| rt.stream(device, which))
            .py(),
    }
}

/// Stream creation flags, as rmm's `CudaStreamFlags`: `SYNC_DEFAULT`
/// streams synchronize with the legacy default stream, `NON_BLOCKING` ones
/// do not.
#[pyclass(eq, eq_int, hash, frozen, name = "StreamFlags", module = "devmm")]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum PyStreamFlags {
    /// Synchronizes with the legacy default stream.
    #[pyo3(name = "SYNC_DEFAULT")]
    SyncDefault = 0,
    /// Does not synchronize with the legacy default stream.
    #[pyo3(name = "NON_BLOCKING")]
    NonBlocking = 1,
}

impl From<PyStreamFlags> for devmm::StreamFlags {
    fn from(flags: PyStreamFlags) -> Self {
        match flags {
            PyStreamFlags::SyncDefault => devmm::StreamFlags::SyncDefault,
            PyStreamFlags::NonBlocking => devmm::StreamFlags::NonBlocking,
        }
    }
}

#[pymethods]
impl PyStreamFlags {
    fn __reduce__(&self, py: Python<'_>) -> PyResult<(Py<PyAny>, (i32,))> {
        Ok((
            py.get_type::<PyStreamFlags>().into_any().unbind(),
            (*self as i32,),
        ))
    }

    #[new]
    fn py_new(value: i32) -> PyResult<Self> {
        match value {
            0 => Ok(PyStreamFlags::SyncDefault),
            1 => Ok(PyStreamFlags::NonBlocking),
            other => Err(PyValueError::new_err(format!(
                "{other} is not a StreamFlags value; use 0 (SYNC_DEFAULT) or 1 (NON_BLOCKING)"
            ))),
        }
    }
}

/// A thread-safe pool of streams on one device, as rmm's `CudaStreamPool`:
/// `get_stream()` hands them out round-robin (successive calls may return
/// the same stream), `get_stream(id)` by index.
#[pyclass(frozen, name = "StreamPool", module = "devmm")]
pub(crate) struct PyStreamPool {
    inner: devmm::StreamPool,
}

#[pymethods]
impl PyStreamPool {
    /// `pool_size` streams with `flags` on `device` (the default device when `None`).
    #[new]
    #[pyo3(signature = (pool_size = 16, flags = PyStreamFlags::SyncDefault, *, device = None))]
    fn py_new(
        py: Python<'_>,
        pool_size: usize,
        flags: PyStreamFlags,
        device: Option<crate::device::DeviceArg>,
    ) -> PyResult<Self> {
        let device = match device {
            Some(d) => d.0,
            None => devmm::default_device().py()?,
        };
        let inner = maybe_detached(py, device, || {
            devmm::StreamPool::new(device, pool_size, flags.into())
        })
        .py()?;
        Ok(PyStreamPool { inner })
    }

    /// The number of streams in the pool.
    fn get_pool_size(&self) -> usize {
        self.inner.pool_size()
    }

    /// Stream `stream_id`, or the next one when `None`.
    #[pyo3(signature = (stream_id = None))]
    fn get_stream(&self, stream_id: Option<usize>) -> PyResult<PyStream> {
        Ok(self.inner.get_stream(stream_id).py()?.into())
    }
}
