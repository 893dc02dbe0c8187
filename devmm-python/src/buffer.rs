//! `DeviceBuffer`: one owning, stream-ordered allocation.

use std::sync::{Arc, OnceLock};

use pyo3::buffer::PyBuffer;
use pyo3::exceptions::{PyAttributeError, PyTypeError, PyValueError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyMemoryView, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::count::{Count, Nbytes, Size};
use crate::device::{DeviceArg, PyDevice};
use crate::dlpack::{DlpackCopy, DlpackDevice, DlpackStream, DlpackVersion};
use crate::error::IntoPyResult;
use crate::gil::DetachedDrop;
use crate::ipc::{PyIpcDescriptor, PyIpcMemHandle};
use crate::registry;
use crate::resource::{bridge_of, PyMemoryResource, PythonRef};
use crate::stream::{maybe_detached, resolve_stream, stream_object, KeptStreamArg, StreamArg};

/// An allocation that owns its memory and keeps its resource alive.
///
/// `free()` releases it (on its allocation stream unless another is named)
/// and is idempotent; a `with` block frees it on exit, and dropping the last
/// reference frees it too. While DLPack exports of it are alive, `free()`
/// closes it and the memory goes back when the last consumer lets go.
///
/// `DeviceBuffer(nbytes=None, *, mr=None, stream=None, device=None,
/// size=None)`: `nbytes` (or rmm's `size`) is an int, 0 when neither is
/// given; `mr` a `DeviceMemoryResource` (the current resource of `device`
/// when `None`); `stream` a `Stream` or a sentinel (the device's default
/// when `None`); `device` a `Device` or a string (the default device when
/// `None`). `ptr`, `size`/`nbytes`, `device`, `stream`, `mr` and `closed`
/// describe it.
///
/// Raises `ValueError` for a negative or oversized `nbytes` and for a freed
/// buffer's copies, `OutOfMemoryError` (a `MemoryError`) when the resource
/// cannot serve it, `RuntimeUnavailableError` when the device's runtime is
/// absent.
///
/// Examples
/// --------
///
/// ```python
/// >>> import devmm
/// >>> from devmm.mrs.cpu import MallocMemoryResource
/// >>> with devmm.DeviceBuffer(64, mr=MallocMemoryResource()) as buf:
/// ...     buf.nbytes, buf.device, buf.closed
/// (64, Device(type=<DeviceType.CPU: 1>, index=0), False)
/// >>> buf.closed  # freed by the with block
/// True
/// >>> devmm.DeviceBuffer(-1)
/// Traceback (most recent call last):
///     ...
/// ValueError: nbytes must be a non-negative integer from 0 to 18446744073709551615, not -1
///
/// ```
#[pyclass(frozen, weakref, name = "DeviceBuffer", module = "devmm")]
pub(crate) struct PyDeviceBuffer {
    /// Released without the GIL on a GPU ([`DetachedDrop`]).
    pub(crate) buffer: DetachedDrop<Arc<devmm::DeviceBuffer>>,
    pub(crate) mr: Py<PyMemoryResource>,
    /// The `stream` object: the one the buffer was allocated on when one
    /// was passed, else made on first access; the same object every time.
    stream: OnceLock<Py<PyAny>>,
    /// How the buffer's resource holds a Python-defined `mr`, when it
    /// bridges one (see [`bridge_of`]).
    pub(crate) bridge: Option<Arc<PythonRef>>,
    /// The attributes a user sets on the buffer, as on the seed's plain
    /// object: a dict this object shows the collector (PyO3's own `dict`
    /// is not traversed), so `buffer.cycle = buffer` is collected, and the
    /// memory freed once.
    attrs: OnceLock<PythonRef>,
}

impl PyDeviceBuffer {
    /// `buffer` from `mr`, allocated on the stream object `stream` when
    /// one was passed.
    pub(crate) fn wrap(
        buffer: Arc<devmm::DeviceBuffer>,
        mr: Py<PyMemoryResource>,
        stream: Option<Py<PyAny>>,
    ) -> Self {
        PyDeviceBuffer {
            buffer: buffer.into(),
            mr,
            stream: stream.map_or_else(OnceLock::new, OnceLock::from),
            bridge: None,
            attrs: OnceLock::new(),
        }
    }

    /// The dict of user-set attributes, made on first use (an error once
    /// the collector cleared it).
    fn attrs<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let made = match self.attrs.get() {
            Some(made) => made,
            None => {
                // Made before the lock is taken: making a dict may run the
                // collector, whose finalizers may set attributes here too.
                let fresh = PythonRef::new(PyDict::new(py).into_any().unbind());
                self.attrs.get_or_init(|| fresh)
            }
        };
        Ok(made.get(py)?.cast_into::<PyDict>()?)
    }

    /// The user-set attributes, if any were set and the collector has not
    /// cleared them.
    fn attrs_if_any<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyDict>> {
        let attrs = self.attrs.get()?.get(py).ok()?;
        attrs.cast_into::<PyDict>().ok()
    }

    /// The bridge's reference to the Python resource, when this object
    /// alone owns the buffer and the buffer alone owns the bridge: then it
    /// is this object's to report to the collector and to clear.
    fn owned_bridge(&self) -> Option<&PythonRef> {
        self.bridge
            .as_deref()
            .filter(|_| held_only_by(&self.buffer, 1))
    }
}

/// What `DeviceBuffer` and its bases define as `name` (a property, a
/// method), read from their own dicts as attribute lookup does, so the
/// metaclass's attributes (`mro`, `__name__`) are not the buffer's.
fn class_attribute<'py>(
    slf: &Bound<'py, PyDeviceBuffer>,
    name: &Bound<'py, PyString>,
) -> PyResult<Option<Bound<'py, PyAny>>> {
    let py = slf.py();
    for class in slf.get_type().getattr(intern!(py, "__mro__"))?.try_iter()? {
        let own = class?.getattr(intern!(py, "__dict__"))?;
        if own.contains(name)? {
            return Ok(Some(own.get_item(name)?));
        }
    }
    Ok(None)
}

fn not_writable(name: &Bound<'_, PyString>) -> PyErr {
    attribute_error(name, |repr| {
        format!("attribute {repr} of 'devmm.DeviceBuffer' objects is not writable")
    })
}

fn no_attribute(name: &Bound<'_, PyString>) -> PyErr {
    attribute_error(name, |repr| {
        format!("'devmm.DeviceBuffer' object has no attribute {repr}")
    })
}

/// An `AttributeError` whose message `say` writes around `name`'s repr.
fn attribute_error(name: &Bound<'_, PyString>, say: impl FnOnce(&str) -> String) -> PyErr {
    let repr = name
        .repr()
        .map_or_else(|_| String::from("?"), |r| r.to_string());
    PyAttributeError::new_err(say(&repr))
}

/// Whether `holders` references are all there are to `buffer`, and the
/// buffer is all there is to its resource (so its bridge too).
pub(crate) fn held_only_by(buffer: &Arc<devmm::DeviceBuffer>, holders: usize) -> bool {
    Arc::strong_count(buffer) == holders && Arc::strong_count(buffer.resource()) == 1
}

#[pymethods]
impl PyDeviceBuffer {
    /// Allocates `nbytes` bytes (rmm's keyword `size` also names them)
    /// from `mr` (the current resource of `device` when `None`), ordered on
    /// `stream` (the device's default when `None`).
    #[new]
    #[pyo3(signature = (nbytes = None, *, mr = None, stream = None, device = None, size = None))]
    fn py_new(
        py: Python<'_>,
        nbytes: Option<Count<Nbytes>>,
        mr: Option<&Bound<'_, PyMemoryResource>>,
        stream: Option<KeptStreamArg>,
        device: Option<DeviceArg>,
        size: Option<Count<Size>>,
    ) -> PyResult<Self> {
        let (stream, stream_obj) = KeptStreamArg::split(stream);
        if nbytes.is_some() && size.is_some() {
            return Err(PyTypeError::new_err(
                "DeviceBuffer takes its size once: pass nbytes or size, not both",
            ));
        }
        let size = nbytes
            .map(|n| n.get())
            .or(size.map(|n| n.get()))
            .unwrap_or(0);
        let (obj, rust, bridge) = match mr {
            Some(mr) => {
                let (rust, bridge) = bridge_of(mr)?;
                devmm::device_for(&*rust, device.map(|d| d.0)).py()?;
                (mr.clone().unbind(), rust, bridge)
            }
            None => {
                let current = registry::current(py, DeviceArg::or_default(device)?)?;
                (current.obj, current.mr, None)
            }
        };
        let device = rust.device();
        let stream = resolve_stream(stream, device)?;
        let buffer =
            maybe_detached(py, device, || devmm::DeviceBuffer::new(size, rust, &stream)).py()?;
        Ok(PyDeviceBuffer {
            bridge,
            ..PyDeviceBuffer::wrap(Arc::new(buffer), obj, stream_obj)
        })
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.mr)?;
        visit.call(self.stream.get())?;
        if let Some(attrs) = self.attrs.get() {
            attrs.traverse(&visit)?;
        }
        match self.owned_bridge() {
            Some(bridge) => bridge.traverse(&visit),
            None => Ok(()),
        }
    }

    /// The collector's finalizer (PEP 442), run once on every object of a
    /// garbage cycle before any is cleared: a buffer made with `mr=` whose
    /// memory only it holds gives it back then, through the resource while
    /// the whole cycle is still intact (the module installs it as the
    /// type's `tp_finalize`; a reference count reaching zero frees as
    /// always). A buffer the collector then finds resurrected stays freed;
    /// called by hand, it is `free()` where the buffer is this object's
    /// alone, and nothing otherwise.
    fn __del__(&self) {
        if self.owned_bridge().is_some() {
            self.buffer.free_or_log();
        }
    }

    /// Breaking a cycle through the Python resource: the memory goes back
    /// through it first, while it is still whole.
    fn __clear__(&self) {
        if let Some(bridge) = self.owned_bridge() {
            self.buffer.free_or_log();
            bridge.clear();
        }
        if let Some(attrs) = self.attrs.get() {
            attrs.clear();
        }
    }

    /// A user-set attribute (looked up after the class's own).
    fn __getattr__<'py>(
        &self,
        py: Python<'py>,
        name: &Bound<'py, PyString>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let found = match self.attrs_if_any(py) {
            Some(attrs) => attrs.get_item(name)?,
            None => None,
        };
        found.ok_or_else(|| no_attribute(name))
    }

    /// Sets a user attribute; the buffer's own (its properties and
    /// methods) are set as their class says (`__dict__` takes a dict, the
    /// rest are read-only).
    fn __setattr__(
        slf: &Bound<'_, Self>,
        name: &Bound<'_, PyString>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        match class_attribute(slf, name)? {
            Some(own) => match own.getattr_opt(intern!(slf.py(), "__set__"))? {
                Some(set) => set.call1((slf, value)).map(drop),
                None => Err(not_writable(name)),
            },
            None => slf.get().attrs(slf.py())?.set_item(name, value),
        }
    }

    /// Deletes a user attribute; the buffer's own cannot be deleted.
    fn __delattr__(slf: &Bound<'_, Self>, name: &Bound<'_, PyString>) -> PyResult<()> {
        if class_attribute(slf, name)?.is_some() {
            return Err(not_writable(name));
        }
        match slf.get().attrs_if_any(slf.py()) {
            Some(attrs) if attrs.contains(name)? => attrs.del_item(name),
            _ => Err(no_attribute(name)),
        }
    }

    /// The attributes set on the buffer.
    ///
    /// Python type: `dict[str, Any]`
    #[getter]
    fn __dict__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.attrs(py)
    }

    /// Replaces the attributes set on the buffer with `attrs`'s.
    #[setter(__dict__)]
    fn set_dict(&self, py: Python<'_>, attrs: &Bound<'_, PyDict>) -> PyResult<()> {
        let own = self.attrs(py)?;
        own.clear();
        own.update(attrs.as_mapping())
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

    /// The stream the buffer was allocated on: the object passed as
    /// `stream`, when one was (the same object on every access).
    ///
    /// Python type: `Stream`
    #[getter]
    fn stream(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        if let Some(stream) = self.stream.get() {
            return Ok(stream.clone_ref(py));
        }
        let made = stream_object(py, self.buffer.stream())?.unbind();
        // Should another thread have won the race, its object is kept.
        Ok(self.stream.get_or_init(|| made).clone_ref(py))
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
    ///
    /// `stream` is a `Stream`, a sentinel or `None`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> buf = devmm.DeviceBuffer(64)
    /// >>> buf.free()
    /// >>> buf.free()  # idempotent
    /// >>> buf.closed
    /// True
    ///
    /// ```
    #[pyo3(signature = (stream = None))]
    fn free(&self, py: Python<'_>, stream: Option<StreamArg>) -> PyResult<()> {
        free(py, &self.buffer, stream)
    }

    /// Copies `data` (any bytes-like object) into the buffer from byte
    /// `offset`, on `stream` (the buffer's own when `None`). On a default
    /// stream the copy is done when this returns; on another it is
    /// asynchronous and `data` must stay unchanged until the stream is
    /// synchronized (rmm's rule).
    ///
    /// A copy that does not fit, or a freed buffer, is a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> buf = devmm.DeviceBuffer(4)
    /// >>> buf.copy_from_host(b"ab", offset=2)
    /// >>> buf.copy_from_host(b"abcde")
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: cannot copy 5 bytes at offset 0 of a 4-byte buffer on cpu:0: the copy does not fit; copy fewer bytes or use a larger buffer
    ///
    /// ```
    #[pyo3(signature = (data, stream = None, *, offset = 0))]
    fn copy_from_host(
        &self,
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        stream: Option<StreamArg>,
        offset: usize,
    ) -> PyResult<()> {
        let stream = own_or_named(&self.buffer, stream)?;
        let data = bytes_of(data)?;
        let data = data.as_bytes();
        maybe_detached(py, self.buffer.device(), || {
            // SAFETY: the core refuses resources that do not declare their
            // pointers dereferenceable; a Python resource that declares it
            // is trusted, as ctypes trusts the addresses it is given.
            unsafe { self.buffer.copy_from_host_at(offset, data, &stream) }
        })
        .py()
    }

    /// Copies the buffer from byte `offset` (`nbytes` of it; all that
    /// follows `offset` when `None`) to the host: into `out` (any writable
    /// bytes-like object of at least that size), returned, or into a new
    /// NumPy `uint8` array.
    ///
    /// `stream` is as for `free`. A range past the buffer, an `out` too small,
    /// or a freed buffer is a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> buf = devmm.DeviceBuffer.to_device(b"abcd")
    /// >>> buf.copy_to_host()
    /// array([ 97,  98,  99, 100], dtype=uint8)
    /// >>> out = bytearray(2)
    /// >>> buf.copy_to_host(out, offset=2)
    /// bytearray(b'cd')
    ///
    /// ```
    #[pyo3(signature = (out = None, *, offset = 0, nbytes = None, stream = None))]
    fn copy_to_host<'py>(
        &self,
        py: Python<'py>,
        out: Option<Bound<'py, PyAny>>,
        offset: usize,
        nbytes: Option<usize>,
        stream: Option<StreamArg>,
    ) -> PyResult<Bound<'py, PyAny>> {
        // Checked before any host memory is made: an absurd size must be a
        // ValueError, not an allocation failure that aborts the process.
        let nbytes = self.buffer.copy_len(offset, nbytes).py()?;
        let stream = own_or_named(&self.buffer, stream)?;
        let out = match out {
            Some(out) => out,
            None => py
                .import(intern!(py, "numpy"))?
                .call_method1(intern!(py, "empty"), (nbytes, intern!(py, "uint8")))?,
        };
        let target = PyBuffer::<u8>::get(&out)?;
        if target.readonly() || !target.is_c_contiguous() || target.len_bytes() < nbytes {
            return Err(PyValueError::new_err(format!(
                "out must be a writable, contiguous buffer of at least {nbytes} bytes (got {} \
                 bytes{})",
                target.len_bytes(),
                if target.readonly() { ", read-only" } else { "" }
            )));
        }
        let dst = target.buf_ptr() as usize;
        maybe_detached(py, self.buffer.device(), || {
            // SAFETY: `dst` is the start of a writable, contiguous buffer of
            // at least `nbytes` bytes, held by `target` for the call; the
            // resource hands out real memory (checked above).
            let dst = unsafe { std::slice::from_raw_parts_mut(dst as *mut u8, nbytes) };
            // SAFETY: as in `copy_from_host`.
            unsafe { self.buffer.copy_to_host_at(offset, dst, &stream) }
        })
        .py()?;
        drop(target);
        Ok(out)
    }

    /// A new buffer holding a copy of `data` (any bytes-like object), from
    /// `mr` (the current resource of `device` when `None`), copied on
    /// `stream` with rmm's default-stream rule (see `copy_from_host`).
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> buf = devmm.DeviceBuffer.to_device(b"abcd", device="cpu")
    /// >>> buf.nbytes, bytes(buf.copy_to_host())
    /// (4, b'abcd')
    ///
    /// ```
    #[staticmethod]
    #[pyo3(signature = (data, *, stream = None, mr = None, device = None))]
    fn to_device(
        py: Python<'_>,
        data: &Bound<'_, PyAny>,
        stream: Option<KeptStreamArg>,
        mr: Option<&Bound<'_, PyMemoryResource>>,
        device: Option<DeviceArg>,
    ) -> PyResult<Self> {
        let bytes = bytes_of(data)?;
        let nbytes = Count::of(bytes.as_bytes().len());
        let copy_stream = stream.as_ref().map(|kept| kept.arg.clone());
        let made = PyDeviceBuffer::py_new(py, Some(nbytes), mr, stream, device, None)?;
        made.copy_from_host(py, bytes.as_any(), copy_stream, 0)?;
        Ok(made)
    }

    /// A descriptor another process maps this buffer with
    /// (`DeviceBuffer.from_ipc_descriptor`). The buffer must come from a
    /// pool made with `enable_ipc=True` (`ValueError` otherwise). Send it
    /// through `multiprocessing`; the importer frees its buffer before this
    /// one is freed.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.DeviceBuffer(16, device="cpu").ipc_descriptor()
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: invalid argument: a buffer of 16 bytes on cpu:0 from MallocMemoryResource(...) cannot be shared with another process: only a pool made for IPC can; allocate it from CudaAsyncMemoryResource(enable_ipc=True) or HipAsyncMemoryResource(enable_ipc=True) ...
    ///
    /// ```
    ///
    /// With a CUDA device, the descriptor goes to another process:
    ///
    /// ```python
    /// >>> import multiprocessing
    /// >>> from devmm.mrs.cuda import CudaAsyncMemoryResource
    /// >>> mr = CudaAsyncMemoryResource("cuda:0", enable_ipc=True)  # doctest: +SKIP
    /// >>> buf = devmm.DeviceBuffer.to_device(b"shared", mr=mr)  # doctest: +SKIP
    /// >>> queue = multiprocessing.get_context("spawn").Queue()  # doctest: +SKIP
    /// >>> queue.put(buf.ipc_descriptor())  # the other process: queue.get()  # doctest: +SKIP
    ///
    /// ```
    fn ipc_descriptor(&self, py: Python<'_>) -> PyResult<PyIpcDescriptor> {
        // Registers the pickler `multiprocessing` sends descriptors with.
        py.import(intern!(py, "devmm._ipc"))?;
        let device = self.buffer.device();
        let descriptor = maybe_detached(py, device, || self.buffer.ipc_descriptor()).py()?;
        Ok(PyIpcDescriptor {
            inner: std::sync::Mutex::new(descriptor),
        })
    }

    /// Maps the buffer `descriptor` names, exported by another process, on
    /// `stream` (when `None`, the default stream of the exporter's GPU as
    /// this process numbers it: the one at `descriptor.pci_bus_id`, which a
    /// process with another `CUDA_VISIBLE_DEVICES` numbers differently). Its `free()` releases
    /// only this process's mapping, never the exporter's memory. A closed
    /// descriptor, one used in the process that exported it, or one the
    /// driver does not recognise is a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.DeviceBuffer.from_ipc_descriptor(b"not a descriptor")
    /// Traceback (most recent call last):
    ///     ...
    /// TypeError: ...
    ///
    /// ```
    ///
    /// In the process that received `descriptor` (see `ipc_descriptor`):
    ///
    /// ```python
    /// >>> descriptor = queue.get()  # doctest: +SKIP
    /// >>> mapped = devmm.DeviceBuffer.from_ipc_descriptor(descriptor)  # doctest: +SKIP
    /// >>> bytes(mapped.copy_to_host())  # doctest: +SKIP
    /// b'shared'
    /// >>> mapped.free()  # the exporter's memory stays  # doctest: +SKIP
    ///
    /// ```
    #[staticmethod]
    #[pyo3(signature = (descriptor, *, stream = None))]
    fn from_ipc_descriptor(
        py: Python<'_>,
        descriptor: &Bound<'_, PyIpcDescriptor>,
        stream: Option<KeptStreamArg>,
    ) -> PyResult<Self> {
        let (stream, stream_obj) = KeptStreamArg::split(stream);
        // The import's driver calls (which may log, and so ask for the GIL)
        // run on a copy with a file descriptor of its own: the descriptor's
        // lock is held only to copy it, so a thread reading the descriptor
        // with the GIL never waits for them.
        let descriptor = descriptor.get().lock().try_clone()?;
        // The exporter's GPU as this process numbers it.
        let device = descriptor.device_here().py()?;
        let stream = resolve_stream(stream, device)?;
        let buffer = maybe_detached(py, device, || {
            devmm::DeviceBuffer::from_ipc_descriptor(&descriptor, &stream)
        })
        .py()?;
        let buffer = Arc::new(buffer);
        let mr = Py::new(py, PyMemoryResource::native(Arc::clone(buffer.resource())))?;
        Ok(PyDeviceBuffer::wrap(buffer, mr, stream_obj))
    }

    /// The legacy IPC handle (`cudaIpcGetMemHandle`) another process opens
    /// this buffer with (`DeviceBuffer.from_ipc_handle`). The buffer must
    /// be `cudaMalloc` memory: from `CudaRuntimeMemoryResource(device,
    /// async_alloc=False)` (`ValueError` otherwise; pool memory shares
    /// through `ipc_descriptor`). The handle is plain data: send it any
    /// way; every process that opened it frees its buffer before this one
    /// is freed.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> devmm.DeviceBuffer(16, device="cpu").ipc_handle()
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: invalid argument: a buffer of 16 bytes on cpu:0 from MallocMemoryResource(...) has no IPC handle: only cudaMalloc memory has one; allocate it from CudaRuntimeMemoryResource(async_alloc=False) ...
    ///
    /// ```
    ///
    /// With a CUDA device:
    ///
    /// ```python
    /// >>> from devmm.mrs.cuda import CudaRuntimeMemoryResource
    /// >>> mr = CudaRuntimeMemoryResource("cuda:0", async_alloc=False)  # doctest: +SKIP
    /// >>> buf = devmm.DeviceBuffer.to_device(b"shared", mr=mr)  # doctest: +SKIP
    /// >>> handle = buf.ipc_handle()  # send it to another process  # doctest: +SKIP
    ///
    /// ```
    fn ipc_handle(&self, py: Python<'_>) -> PyResult<PyIpcMemHandle> {
        let device = self.buffer.device();
        let inner = maybe_detached(py, device, || self.buffer.ipc_handle()).py()?;
        Ok(PyIpcMemHandle { inner })
    }

    /// Opens the buffer `handle` names, exported by another process, on
    /// `stream` (when `None`, the default stream of the exporter's GPU as
    /// this process numbers it, found by `handle.pci_bus_id`). Its `free()` closes
    /// only this process's mapping (`cudaIpcCloseMemHandle`), never the
    /// exporter's memory. A handle used in the process that exported it, or
    /// one the driver cannot open, is a `ValueError`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> handle = devmm.IpcMemHandle._from_parts("cpu", 16, bytes(64), 1)
    /// >>> devmm.DeviceBuffer.from_ipc_handle(handle)
    /// Traceback (most recent call last):
    ///     ...
    /// ValueError: invalid argument: an IPC handle names memory on cpu:0, which no GPU allocator shares; ...
    ///
    /// ```
    ///
    /// In the process that received `handle` (see `ipc_handle`):
    ///
    /// ```python
    /// >>> opened = devmm.DeviceBuffer.from_ipc_handle(handle)  # doctest: +SKIP
    /// >>> bytes(opened.copy_to_host())  # doctest: +SKIP
    /// b'shared'
    /// >>> opened.free()  # the exporter's memory stays  # doctest: +SKIP
    ///
    /// ```
    #[staticmethod]
    #[pyo3(signature = (handle, *, stream = None))]
    fn from_ipc_handle(
        py: Python<'_>,
        handle: &Bound<'_, PyIpcMemHandle>,
        stream: Option<KeptStreamArg>,
    ) -> PyResult<Self> {
        let (stream, stream_obj) = KeptStreamArg::split(stream);
        let handle = handle.get().inner;
        // The exporter's GPU as this process numbers it.
        let device = handle.device_here().py()?;
        let stream = resolve_stream(stream, device)?;
        let buffer = maybe_detached(py, device, || {
            devmm::DeviceBuffer::from_ipc_handle(&handle, &stream)
        })
        .py()?;
        let buffer = Arc::new(buffer);
        let mr = Py::new(py, PyMemoryResource::native(Arc::clone(buffer.resource())))?;
        Ok(PyDeviceBuffer::wrap(buffer, mr, stream_obj))
    }

    /// The buffer as a 1-D `uint8` DLPack tensor (as cuda.core's `Buffer`
    /// exports); the arguments are those of `Tensor.__dlpack__`.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<DlpackStream>,
        max_version: Option<DlpackVersion>,
        dl_device: Option<DlpackDevice>,
        copy: Option<DlpackCopy>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let bytes = devmm::Tensor::bytes_of(Arc::clone(&slf.get().buffer)).py()?;
        crate::dlpack::export_capsule(slf.as_any(), &bytes, stream, max_version, dl_device, copy)
    }

    /// `(device_type, device_id)` as the DLPack protocol reports it.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.buffer.device().dlpack_device()
    }

    /// DLPack 1.3's C exchange API for the bytes, as `Tensor`'s (its
    /// optional `dltensor_from_py_object_no_sync` entry is NULL).
    ///
    /// Python type: `object`
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::exchange_api::buffer_capsule(py)
    }

    /// The CUDA Array Interface (version 3) of the bytes, for CUDA memory;
    /// `AttributeError` elsewhere; `BufferError` once freed.
    ///
    /// Python type: `dict[str, object]`
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let bytes = devmm::Tensor::bytes_of(Arc::clone(&self.buffer)).py()?;
        crate::interchange::array_interface(py, &bytes, devmm::ArrayInterfaceKind::Cuda)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let bytes = devmm::Tensor::bytes_of(Arc::clone(&slf.get().buffer)).py()?;
        // SAFETY: forwarded from Python's bf_getbuffer.
        unsafe { crate::interchange::get_buffer(slf.as_any(), &bytes, view, flags) }
    }

    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: forwarded from Python's bf_releasebuffer.
        unsafe { crate::interchange::release_buffer(view) }
    }

    /// Refuses: device memory is not serialisable.
    fn __reduce__(&self) -> PyResult<Py<PyAny>> {
        Err(not_picklable("DeviceBuffer"))
    }

    /// The buffer itself; a freed one is a `ValueError` (use after free).
    fn __enter__(slf: Bound<'_, Self>) -> PyResult<Bound<'_, Self>> {
        slf.get().buffer.check_open().py()?;
        Ok(slf)
    }

    #[pyo3(signature = (*_exc))]
    fn __exit__(&self, py: Python<'_>, _exc: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.free(py, None)?;
        Ok(false)
    }

    fn __repr__(&self) -> String {
        self.buffer.to_string()
    }
}

/// `DeviceBuffer.free` (and `Tensor.free`, which needs no `DeviceBuffer`
/// object for it): frees `buffer` on `stream`, the allocation stream when
/// `None`.
pub(crate) fn free(
    py: Python<'_>,
    buffer: &devmm::DeviceBuffer,
    stream: Option<StreamArg>,
) -> PyResult<()> {
    let stream = own_or_named(buffer, stream)?;
    maybe_detached(py, buffer.device(), || buffer.free(&stream)).py()
}

/// Waits until the stream of `buffer`, just allocated, has reached its
/// allocation, so the host may write it at once (the Numba bridge's pinned
/// arrays): the core's `wait_for_allocation`, a no-op for a resource that
/// is not stream-ordered.
#[pyfunction]
pub(crate) fn wait_for_allocation(py: Python<'_>, buffer: &PyDeviceBuffer) -> PyResult<()> {
    let buffer = &buffer.buffer;
    maybe_detached(py, buffer.device(), || {
        devmm::wait_for_allocation(&**buffer.resource(), buffer.stream())
    })
    .py()
}

/// The stream an operation on `buffer` runs on: the named one (checked
/// against its device), or the buffer's own.
fn own_or_named(
    buffer: &devmm::DeviceBuffer,
    stream: Option<StreamArg>,
) -> PyResult<devmm::Stream> {
    match stream {
        None => Ok(buffer.stream().clone()),
        some => resolve_stream(some, buffer.device()),
    }
}

/// The bytes of a bytes-like object (`bytes`, `bytearray`, `memoryview`, a
/// NumPy array, ...) read through the buffer protocol; items wider than a
/// byte are read as their raw bytes. `bytes` is used as is. A source that
/// is not C-contiguous is a `ValueError`: copying it in C order would
/// silently reorder (or gather) what the caller sees as contiguous memory.
fn bytes_of<'py>(data: &Bound<'py, PyAny>) -> PyResult<Bound<'py, PyBytes>> {
    if let Ok(bytes) = data.cast::<PyBytes>() {
        return Ok(bytes.clone());
    }
    // pyo3's typed `PyBuffer<u8>` refuses items wider than a byte; a
    // memoryview reads any format as raw bytes (and raises the TypeError
    // for non-buffers).
    let py = data.py();
    let view = PyMemoryView::from(data)?;
    if !view.getattr(intern!(py, "c_contiguous"))?.is_truthy()? {
        return Err(PyValueError::new_err(
            "a copy from the host needs a C-contiguous source; pass a contiguous copy \
             (numpy.ascontiguousarray, bytes(...))",
        ));
    }
    Ok(view
        .call_method0(intern!(py, "tobytes"))?
        .cast_into::<PyBytes>()?)
}

/// The refusal to pickle device memory (see docs/adr/0010).
pub(crate) fn not_picklable(what: &str) -> PyErr {
    pyo3::exceptions::PyTypeError::new_err(format!(
        "cannot pickle a devmm {what}: device memory is not serialisable; copy the bytes to the \
         host (np.asarray, copy_to_host) and pickle those"
    ))
}
