//! `DeviceBuffer`: one owning, stream-ordered allocation.

use std::sync::Arc;

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyMemoryView, PyTuple};

use crate::count::{Count, Size};
use crate::device::{DeviceArg, PyDevice};
use crate::error::IntoPyResult;
use crate::registry;
use crate::resource::{resource_of, PyMemoryResource};
use crate::stream::{maybe_detached, resolve_stream, PyStream, StreamArg};

/// An allocation that owns its memory and keeps its resource alive.
///
/// `free()` releases it (on its allocation stream unless another is named)
/// and is idempotent; a `with` block frees it on exit, and dropping the last
/// reference frees it too. While DLPack exports of it are alive, `free()`
/// closes it and the memory goes back when the last consumer lets go.
#[pyclass(frozen, name = "DeviceBuffer", module = "devmm")]
pub(crate) struct PyDeviceBuffer {
    pub(crate) buffer: Arc<devmm::DeviceBuffer>,
    pub(crate) mr: Py<PyMemoryResource>,
}

impl PyDeviceBuffer {
    pub(crate) fn wrap(buffer: Arc<devmm::DeviceBuffer>, mr: Py<PyMemoryResource>) -> Self {
        PyDeviceBuffer { buffer, mr }
    }
}

impl PyDeviceBuffer {
    /// Refuses host copies from a buffer of `RecordingMemoryResource` (or
    /// of an adaptor over it): its addresses are made up, and copying
    /// through them would touch arbitrary memory.
    fn check_real_memory(&self) -> PyResult<()> {
        let chain = devmm::resource_chain(self.buffer.resource().as_ref());
        if chain.contains(RECORDING) {
            return Err(PyValueError::new_err(format!(
                "the buffer's addresses are fake ({chain}); {RECORDING} records calls and holds \
                 no memory to copy to or from"
            )));
        }
        Ok(())
    }
}

/// The testing double whose addresses are made up.
const RECORDING: &str = "RecordingMemoryResource";

#[pymethods]
impl PyDeviceBuffer {
    /// Allocates `size` bytes from `mr` (the current resource of `device`
    /// when `None`), ordered on `stream` (the device's default when `None`).
    #[new]
    #[pyo3(signature = (size, *, mr = None, stream = None, device = None))]
    fn py_new(
        py: Python<'_>,
        size: Count<Size>,
        mr: Option<&Bound<'_, PyMemoryResource>>,
        stream: Option<StreamArg>,
        device: Option<DeviceArg>,
    ) -> PyResult<Self> {
        let size = size.get();
        let (obj, rust) = match mr {
            Some(mr) => {
                let rust = resource_of(mr)?;
                if let Some(DeviceArg(device)) = device {
                    if device != rust.device() {
                        return Err(PyValueError::new_err(format!(
                            "device {device} was asked for, but the resource {rust:?} allocates \
                             on {}; pass a resource of {device} or drop the device argument",
                            rust.device()
                        )));
                    }
                }
                (mr.clone().unbind(), rust)
            }
            None => {
                let device = match device {
                    Some(d) => d.0,
                    None => devmm::default_device().py()?,
                };
                let current = registry::current(py, device)?;
                (current.obj, current.mr)
            }
        };
        let device = rust.device();
        let stream = resolve_stream(stream, device)?;
        let buffer =
            maybe_detached(py, device, || devmm::DeviceBuffer::new(size, rust, &stream)).py()?;
        Ok(PyDeviceBuffer::wrap(Arc::new(buffer), obj))
    }

    /// The address of the allocation (0 for zero bytes).
    #[getter]
    fn ptr(&self) -> usize {
        self.buffer.ptr().addr()
    }

    /// The size in bytes.
    #[getter]
    fn size(&self) -> usize {
        self.buffer.nbytes()
    }

    /// The size in bytes (the same as `size`).
    #[getter]
    fn nbytes(&self) -> usize {
        self.buffer.nbytes()
    }

    /// The device the memory lives on.
    #[getter]
    fn device(&self) -> PyDevice {
        self.buffer.device().into()
    }

    /// The stream the buffer was allocated on.
    #[getter]
    fn stream(&self) -> PyStream {
        self.buffer.stream().clone().into()
    }

    /// The resource that owns the memory.
    #[getter]
    fn mr(&self, py: Python<'_>) -> Py<PyMemoryResource> {
        self.mr.clone_ref(py)
    }

    /// Whether `free()` was called.
    #[getter]
    fn closed(&self) -> bool {
        self.buffer.is_closed()
    }

    /// DLPack exports of this buffer that no consumer has released yet.
    #[getter]
    fn live_exports(&self) -> usize {
        self.buffer.live_exports()
    }

    /// Frees the memory, ordered on `stream` (the allocation stream when
    /// `None`). Idempotent.
    #[pyo3(signature = (stream = None))]
    fn free(&self, py: Python<'_>, stream: Option<StreamArg>) -> PyResult<()> {
        let device = self.buffer.device();
        let stream = match stream {
            None => self.buffer.stream().clone(),
            some => resolve_stream(some, device)?,
        };
        maybe_detached(py, device, || self.buffer.free(&stream)).py()
    }

    /// Copies `data` (any bytes-like object) to the start of the buffer.
    fn copy_from_host(&self, py: Python<'_>, data: &Bound<'_, PyAny>) -> PyResult<()> {
        self.check_real_memory()?;
        let data = bytes_of(data)?;
        let data = data.as_bytes();
        maybe_detached(py, self.buffer.device(), || {
            // SAFETY: the resource is not the testing double with fake
            // addresses (checked above); every other resource, Python ones
            // included, is trusted to hand out real memory of its device, as
            // ctypes trusts the addresses it is given.
            unsafe { self.buffer.copy_from_host(data) }
        })
        .py()
    }

    /// The first `nbytes` bytes of the buffer (all of it when `None`), copied to the host.
    #[pyo3(signature = (nbytes = None))]
    fn copy_to_host<'py>(
        &self,
        py: Python<'py>,
        nbytes: Option<usize>,
    ) -> PyResult<Bound<'py, PyBytes>> {
        let nbytes = nbytes.unwrap_or(self.buffer.nbytes());
        // Checked before the bytes object is made: an absurd size must be a
        // ValueError, not an allocation failure that aborts the process.
        if nbytes > self.buffer.nbytes() {
            return Err(PyValueError::new_err(format!(
                "copy of {nbytes} bytes does not fit a buffer of {} bytes on {}",
                self.buffer.nbytes(),
                self.buffer.device()
            )));
        }
        self.check_real_memory()?;
        PyBytes::new_with(py, nbytes, |out| {
            maybe_detached(py, self.buffer.device(), || {
                // SAFETY: as in `copy_from_host`: the resource hands out
                // real memory of its device.
                unsafe { self.buffer.copy_to_host(out) }
            })
            .py()
        })
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.free(py, None)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        format!(
            "DeviceBuffer(ptr={:#x}, size={}, device={}, closed={})",
            self.buffer.ptr().addr(),
            self.buffer.nbytes(),
            self.buffer.device(),
            if self.buffer.is_closed() {
                "True"
            } else {
                "False"
            }
        )
    }
}

/// The bytes of a bytes-like object (`bytes`, `bytearray`, `memoryview`, a
/// NumPy array, ...) read through the buffer protocol, in C order; items
/// wider than a byte are read as their raw bytes. `bytes` is used as is.
fn bytes_of<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(bytes) = data.cast::<PyBytes>() {
        return Ok(bytes.clone());
    }
    // pyo3's buffer API is not in the limited API before 3.11; a
    // memoryview gives the same bytes (and the TypeError for non-buffers).
    Ok(PyMemoryView::from(data)?
        .call_method0(intern!(data.py(), "tobytes"))?
        .cast_into::<PyBytes>()?)
}
