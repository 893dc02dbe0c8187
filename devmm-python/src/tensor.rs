//! `Tensor`, `empty` and `empty_like`.

use std::sync::{Arc, OnceLock};

use pyo3::exceptions::{PyAttributeError, PyTypeError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyString, PyTuple};
use pyo3::{PyTraverseError, PyVisit};

use crate::buffer::PyDeviceBuffer;
use crate::count::{Count, Offset};
use crate::device::{DeviceArg, PyDevice};
use crate::dlpack::{DlpackCopy, DlpackDevice, DlpackStream, DlpackVersion};
use crate::dtype::{DTypeArg, PyDType};
use crate::error::IntoPyResult;
use crate::gil::DetachedDrop;
use crate::layout::{PyDeviceOptimal, PyLayout, PyLayoutPolicy, ShapeArg};
use crate::resource::{bridge_of, object_of, PyMemoryResource, PythonRef};
use crate::stream::{maybe_detached, resolve_stream, KeptStreamArg, StreamArg};

/// A typed, shaped view over an owning `DeviceBuffer`: what `empty` returns
/// and what DLPack consumers take. Not an array: no arithmetic, no indexing.
///
/// `Tensor(buffer, dtype, shape, layout, offset=0, read_only=False)` views
/// an existing `DeviceBuffer`; `empty`, `empty_like` and `from_dlpack` make
/// tensors. `shape`, `strides` (in elements), `dtype`, `device`, `layout`,
/// `buffer` and `read_only` describe it; `__dlpack__` exports it (a
/// `BufferError` for every refusal: a freed buffer, `copy=True`, a device
/// it cannot reach).
///
/// Examples
/// --------
///
/// ```python
/// >>> import numpy as np
/// >>> import devmm
/// >>> t = devmm.empty((2, 3), "float32", layout=devmm.RowMajor())
/// >>> t
/// Tensor(shape=(2, 3), dtype=float32, device=cpu:0, offset=0, read_only=False)
/// >>> t.strides, np.from_dlpack(t).shape
/// ((3, 1), (2, 3))
/// >>> f32 = devmm.DType.from_string("float32")
/// >>> layout = devmm.RowMajor()((2, 3), f32, devmm.Device("cpu"))
/// >>> devmm.Tensor(devmm.DeviceBuffer(24), f32, (2, 3), layout).shape
/// (2, 3)
///
/// ```
#[pyclass(frozen, weakref, name = "Tensor", module = "devmm")]
pub(crate) struct PyTensor {
    /// Released without the GIL on a GPU ([`DetachedDrop`]).
    pub(crate) tensor: DetachedDrop<devmm::Tensor>,
    /// The layout's provenance (`None` for a hand-built layout).
    policy: Option<Py<PyAny>>,
    /// The resource object; `None` for an import, whose buffer's foreign
    /// resource has no Python object: one is made with the `buffer`
    /// object, on first use (making it on every import cost a third of
    /// `from_dlpack`'s own work).
    mr: Option<Py<PyMemoryResource>>,
    buffer: OnceLock<Py<PyDeviceBuffer>>,
    /// The `Stream` object `empty` was given, for the buffer's `stream`.
    stream: Option<Py<PyAny>>,
    /// How the buffer's resource holds a Python-defined `mr`, when it
    /// bridges one.
    bridge: Option<Arc<PythonRef>>,
}

impl PyTensor {
    /// The bridge's reference to the Python resource, when this object
    /// alone owns the tensor, the tensor and its `buffer` object alone own
    /// the buffer, nothing but this tensor holds that `buffer` object, and
    /// the buffer alone owns the bridge.
    fn owned_bridge(&self) -> Option<&PythonRef> {
        let buffer_object = self.buffer.get();
        // SAFETY: reads the count of a live object this tensor holds; the
        // callers (traversal, clearing, finalizing) run with the GIL held.
        let ours = buffer_object.is_none_or(|b| unsafe { pyo3::ffi::Py_REFCNT(b.as_ptr()) } == 1);
        let holders = 1 + usize::from(buffer_object.is_some());
        let exclusive = ours
            && !self.tensor.is_shared()
            && crate::buffer::held_only_by(self.tensor.buffer(), holders);
        self.bridge.as_deref().filter(|_| exclusive)
    }

    /// A tensor devmm did not allocate (a DLPack import): its resource is
    /// the core's foreign-memory resource, and it has no policy object.
    pub(crate) fn imported(tensor: devmm::Tensor) -> PyTensor {
        PyTensor {
            tensor: tensor.into(),
            policy: None,
            mr: None,
            buffer: OnceLock::new(),
            stream: None,
            bridge: None,
        }
    }

    /// The resource object (the same object on every access): an
    /// import's is its `buffer` object's.
    fn mr(&self, py: Python<'_>) -> PyResult<Py<PyMemoryResource>> {
        match &self.mr {
            Some(mr) => Ok(mr.clone_ref(py)),
            None => Ok(self.buffer(py)?.get().mr.clone_ref(py)),
        }
    }
}

impl PyTensor {
    /// The tensor `Tensor.to` made of this one: from the resource the core
    /// allocated it from, its layout's provenance `policy` when a layout
    /// was given (`Some`), else this tensor's; `stream` is the `Stream`
    /// object its buffer was allocated on, if one was given.
    pub(crate) fn copied(
        &self,
        py: Python<'_>,
        copy: devmm::Tensor,
        policy: Option<Option<Py<PyAny>>>,
        stream: Option<Py<PyAny>>,
    ) -> PyResult<PyTensor> {
        let policy = policy.unwrap_or_else(|| self.policy.as_ref().map(|p| p.clone_ref(py)));
        Ok(PyTensor {
            mr: Some(object_of(py, copy.buffer().resource())?),
            tensor: copy.into(),
            policy,
            buffer: OnceLock::new(),
            stream,
            bridge: None,
        })
    }
}

#[pymethods]
impl PyTensor {
    /// Imports any DLPack producer (or an unconsumed DLPack capsule) as a
    /// devmm `Tensor`, zero-copy; the same as `devmm.from_dlpack`.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import numpy as np
    /// >>> import devmm
    /// >>> devmm.Tensor.from_dlpack(np.arange(3))
    /// Tensor(shape=(3,), dtype=int64, device=cpu:0, offset=0, read_only=False)
    ///
    /// ```
    #[staticmethod]
    #[pyo3(signature = (obj, *, stream = None))]
    fn from_dlpack(
        py: Python<'_>,
        obj: &Bound<'_, PyAny>,
        stream: Option<StreamArg>,
    ) -> PyResult<PyTensor> {
        from_dlpack(py, obj, stream)
    }

    /// NumPy's array interface (version 3), for host-accessible tensors;
    /// `AttributeError` elsewhere; `BufferError` once the memory was freed.
    /// `np.asarray(t)` is a zero-copy view.
    ///
    /// Python type: `dict[str, object]`
    #[getter]
    fn __array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::interchange::array_interface(py, &self.tensor, devmm::ArrayInterfaceKind::Host)
    }

    /// The CUDA Array Interface (version 3, with `stream`), for CUDA
    /// memory; `AttributeError` elsewhere; `BufferError` once freed.
    ///
    /// Python type: `dict[str, object]`
    #[getter]
    fn __cuda_array_interface__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        crate::interchange::array_interface(py, &self.tensor, devmm::ArrayInterfaceKind::Cuda)
    }

    unsafe fn __getbuffer__(
        slf: Bound<'_, Self>,
        view: *mut pyo3::ffi::Py_buffer,
        flags: std::ffi::c_int,
    ) -> PyResult<()> {
        let tensor = slf.get().tensor.clone();
        // SAFETY: forwarded from Python's bf_getbuffer.
        unsafe { crate::interchange::get_buffer(slf.as_any(), &tensor, view, flags) }
    }

    unsafe fn __releasebuffer__(&self, view: *mut pyo3::ffi::Py_buffer) {
        // SAFETY: forwarded from Python's bf_releasebuffer.
        unsafe { crate::interchange::release_buffer(view) }
    }

    /// Refuses: device memory is not serialisable.
    fn __reduce__(&self) -> PyResult<Py<PyAny>> {
        Err(crate::buffer::not_picklable("Tensor"))
    }

    /// A tensor viewing `buffer` (which it keeps alive) as `shape` of
    /// `dtype` laid out as `layout`, its first element `offset` elements
    /// into the buffer. The layout must be for `shape` and `dtype`, fit the
    /// buffer from `offset`, and its base alignment must hold there
    /// (`ValueError` otherwise). `read_only` flags DLPack exports.
    #[new]
    #[pyo3(signature = (buffer, dtype, shape, layout, offset = Count::of(0), read_only = false),
           text_signature = "(buffer, dtype, shape, layout, offset=0, read_only=False)")]
    fn py_new(
        buffer: &Bound<'_, PyDeviceBuffer>,
        dtype: DTypeArg,
        shape: ShapeArg,
        layout: &PyLayout,
        offset: Count<Offset>,
        read_only: bool,
    ) -> PyResult<Self> {
        let (py, owner) = (buffer.py(), buffer.get());
        let buf = Arc::clone(&owner.buffer);
        let tensor =
            devmm::Tensor::view_of(buf, dtype.0, &shape.0, layout.layout.clone(), offset.get())
                .py()?;
        Ok(PyTensor {
            tensor: if read_only {
                tensor.to_read_only().into()
            } else {
                tensor.into()
            },
            policy: layout.policy.as_ref().map(|p| p.clone_ref(py)),
            mr: Some(owner.mr.clone_ref(py)),
            buffer: OnceLock::from(buffer.clone().unbind()),
            stream: None,
            bridge: owner.bridge.clone(),
        })
    }

    /// Extents, one per dimension.
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn shape<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.shape())
    }

    /// Strides in elements (DLPack's convention; NumPy reports bytes).
    ///
    /// Python type: `tuple[int, ...]`
    #[getter]
    fn strides<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyTuple>> {
        PyTuple::new(py, self.tensor.strides())
    }

    /// Number of dimensions.
    #[getter]
    fn ndim(&self) -> usize {
        self.tensor.shape().len()
    }

    /// The element type.
    #[getter]
    fn dtype(&self) -> PyDType {
        self.tensor.dtype().into()
    }

    /// The device of the buffer.
    #[getter]
    fn device(&self) -> PyDevice {
        self.tensor.device().into()
    }

    /// The buffer the tensor views (the same object on every access).
    #[getter]
    fn buffer(&self, py: Python<'_>) -> PyResult<Py<PyDeviceBuffer>> {
        if let Some(buffer) = self.buffer.get() {
            return Ok(buffer.clone_ref(py));
        }
        let made = Py::new(
            py,
            PyDeviceBuffer::wrap(
                Arc::clone(self.tensor.buffer()),
                match &self.mr {
                    Some(mr) => mr.clone_ref(py),
                    None => Py::new(
                        py,
                        PyMemoryResource::native(Arc::clone(self.tensor.buffer().resource())),
                    )?,
                },
                self.stream.as_ref().map(|s| s.clone_ref(py)),
            ),
        )?;
        // Should another thread have won the race, its object is kept.
        Ok(self.buffer.get_or_init(|| made).clone_ref(py))
    }

    /// Frees the buffer, ordered on `stream` (the allocation stream when
    /// `None`): the same as `buffer.free(stream)`, without making the
    /// `buffer` object. Idempotent; while DLPack exports are alive it
    /// closes the buffer and the memory goes back when the last one is
    /// released.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import numpy as np
    /// >>> import devmm
    /// >>> t = devmm.empty((4,), "float32")
    /// >>> t.free()
    /// >>> t.buffer.closed
    /// True
    /// >>> np.from_dlpack(t)
    /// Traceback (most recent call last):
    ///     ...
    /// BufferError: cannot export a freed DeviceBuffer (use-after-free): ...
    ///
    /// ```
    #[pyo3(signature = (stream = None))]
    fn free(&self, py: Python<'_>, stream: Option<StreamArg>) -> PyResult<()> {
        crate::buffer::free(py, self.tensor.buffer(), stream)
    }

    /// The resolved layout; its `policy` is the policy object `empty` was
    /// given (or the given layout's own).
    #[getter]
    fn layout(&self, py: Python<'_>) -> PyLayout {
        PyLayout {
            layout: self.tensor.layout().clone(),
            policy: self.policy.as_ref().map(|p| p.clone_ref(py)),
        }
    }

    /// The first element's address (0 when the tensor has no elements).
    #[getter]
    fn data_ptr(&self) -> usize {
        self.tensor.data_ptr().addr()
    }

    /// Bytes from the buffer's start to the first element.
    #[getter]
    fn byte_offset(&self) -> usize {
        self.tensor.byte_offset()
    }

    /// Elements from the buffer's start to the first element (`byte_offset
    /// / itemsize`); a `ValueError` in the rare case the byte offset is not
    /// a whole number of elements (read `byte_offset` then).
    #[getter]
    fn offset(&self) -> PyResult<usize> {
        self.tensor.checked_offset().py()
    }

    /// Whether consumers must not write.
    #[getter]
    fn read_only(&self) -> bool {
        self.tensor.is_read_only()
    }

    /// The same memory, flagged read-only for DLPack consumers.
    ///
    /// Examples
    /// --------
    ///
    /// ```python
    /// >>> import devmm
    /// >>> t = devmm.empty((4,), "float32")
    /// >>> t.read_only, t.to_read_only().read_only
    /// (False, True)
    ///
    /// ```
    fn to_read_only(&self, py: Python<'_>) -> PyResult<PyTensor> {
        Ok(PyTensor {
            tensor: self.tensor.to_read_only().into(),
            policy: self.policy.as_ref().map(|p| p.clone_ref(py)),
            mr: Some(self.mr(py)?),
            buffer: OnceLock::new(),
            stream: self.stream.as_ref().map(|s| s.clone_ref(py)),
            bridge: self.bridge.clone(),
        })
    }

    /// Exports the tensor as a DLPack capsule, zero-copy: the versioned
    /// struct for consumers passing `max_version >= (1, 0)`, the legacy one
    /// otherwise. `stream` is the consumer's stream (-1: no ordering);
    /// `copy=True` and a `dl_device` other than the tensor's raise
    /// `BufferError`, as does a tensor whose buffer was freed.
    #[pyo3(signature = (*, stream = None, max_version = None, dl_device = None, copy = None))]
    fn __dlpack__<'py>(
        slf: &Bound<'py, Self>,
        stream: Option<DlpackStream>,
        max_version: Option<DlpackVersion>,
        dl_device: Option<DlpackDevice>,
        copy: Option<DlpackCopy>,
    ) -> PyResult<Bound<'py, PyAny>> {
        let tensor = &slf.get().tensor;
        crate::dlpack::export_capsule(slf.as_any(), tensor, stream, max_version, dl_device, copy)
    }

    /// `(device_type, device_id)` as the DLPack protocol reports it.
    fn __dlpack_device__(&self) -> (i32, i32) {
        self.tensor.device().dlpack_device()
    }

    /// DLPack 1.3's C exchange API: a `PyCapsule` named
    /// `"dlpack_exchange_api"` over devmm's `DLPackExchangeAPI` table, which
    /// C consumers call instead of `__dlpack__` (same zero-copy exports).
    ///
    /// Python type: `object`
    #[classattr]
    fn __dlpack_c_exchange_api__(py: Python<'_>) -> PyResult<Py<PyAny>> {
        crate::exchange_api::tensor_capsule(py)
    }

    fn __traverse__(&self, visit: PyVisit<'_>) -> Result<(), PyTraverseError> {
        visit.call(&self.policy)?;
        visit.call(&self.mr)?;
        visit.call(self.buffer.get())?;
        visit.call(&self.stream)?;
        match self.owned_bridge() {
            Some(bridge) => bridge.traverse(&visit),
            None => Ok(()),
        }
    }

    /// The collector's finalizer, as `DeviceBuffer.__del__`.
    fn __del__(&self) {
        if self.owned_bridge().is_some() {
            self.tensor.buffer().free_or_log();
        }
    }

    /// Breaking a cycle through the Python resource: the memory goes back
    /// through it first, while it is still whole.
    fn __clear__(&self) {
        if let Some(bridge) = self.owned_bridge() {
            self.tensor.buffer().free_or_log();
            bridge.clear();
        }
    }

    /// The seed's form: `Tensor(shape=(2, 3), dtype=float32, device=cpu:0,
    /// offset=0, read_only=False)`, the offset in elements (in bytes, as
    /// `byte_offset=`, when it is not a whole number of them).
    fn __repr__(&self) -> String {
        self.tensor.to_string()
    }
}

/// The seed's default `layout=`: `DeviceOptimal()` (cache-line rows on the
/// host, 128-byte rows on a GPU), the object `devmm.DeviceOptimal()` gives.
fn default_policy(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static DEVICE_OPTIMAL: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    DEVICE_OPTIMAL
        .get_or_try_init(py, || {
            Ok::<_, PyErr>(py.get_type::<PyDeviceOptimal>().call0()?.unbind())
        })
        .map(|p| p.bind(py))
}

/// A `layout` argument: a policy to resolve, or a resolved `Layout`.
///
/// Python type: `LayoutPolicy | Layout`
pub(crate) enum LayoutArg<'py> {
    /// Resolved by `empty` for the shape and dtype.
    Policy(Bound<'py, PyLayoutPolicy>),
    /// Used as it is, once checked against the shape and dtype.
    Resolved(Bound<'py, PyLayout>),
}

impl<'py> FromPyObject<'_, 'py> for LayoutArg<'py> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'_, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(policy) = obj.cast::<PyLayoutPolicy>() {
            return Ok(LayoutArg::Policy(policy.to_owned()));
        }
        if let Ok(layout) = obj.cast::<PyLayout>() {
            return Ok(LayoutArg::Resolved(layout.to_owned()));
        }
        Err(pyo3::exceptions::PyTypeError::new_err(format!(
            "layout must be a devmm.LayoutPolicy or a resolved devmm.Layout, not {}",
            obj.get_type().name()?
        )))
    }
}

/// What `empty` and `empty_like` were asked for besides the shape and
/// dtype: the core's options, and the Python objects the tensor keeps.
struct Request {
    options: devmm::EmptyOptions,
    /// The layout's provenance: the policy given, or the given layout's.
    policy: Option<Py<PyAny>>,
    /// Whether a `layout` was given (else `DeviceOptimal()` lays it out).
    layout_given: bool,
    /// A policy written in Python, called for the layout once the device is known.
    python_policy: Option<Py<PyLayoutPolicy>>,
    /// The resource given, and its bridge when it is Python-defined.
    mr: Option<(Py<PyMemoryResource>, Option<Arc<PythonRef>>)>,
}

impl Request {
    /// The arguments as the core's options; nothing is defaulted here.
    fn new(
        py: Python<'_>,
        layout: Option<LayoutArg<'_>>,
        device: Option<DeviceArg>,
        mr: Option<&Bound<'_, PyMemoryResource>>,
    ) -> PyResult<Request> {
        let mut options = devmm::EmptyOptions::new();
        let layout_given = layout.is_some();
        let mut python_policy = None;
        let policy = match layout {
            Some(LayoutArg::Policy(policy)) => match &policy.get().inner {
                Some(inner) => {
                    options = options.layout_shared(Arc::clone(inner));
                    Some(policy.into_any().unbind())
                }
                None => {
                    python_policy = Some(policy.unbind());
                    None
                }
            },
            Some(LayoutArg::Resolved(layout)) => {
                let layout = layout.get();
                options = options.resolved_layout(layout.layout.clone());
                layout.policy.as_ref().map(|p| p.clone_ref(py))
            }
            None => None,
        };
        if let Some(device) = device {
            options = options.device(device.0);
        }
        let mr = match mr {
            Some(mr) => {
                let (rust, bridge) = bridge_of(mr)?;
                options = options.resource(rust);
                Some((mr.clone().unbind(), bridge))
            }
            None => None,
        };
        Ok(Request {
            options,
            policy,
            layout_given,
            python_policy,
            mr,
        })
    }

    /// `empty_like`: the core's rule completes the options from the array
    /// imitated (its device, its memory `order`); a kept order is reported
    /// as a `Permuted` policy.
    fn imitating(
        mut self,
        py: Python<'_>,
        device: devmm::Device,
        order: Option<devmm::Permuted>,
    ) -> PyResult<Request> {
        let (options, kept) = self.options.imitating(device, order);
        self.options = options;
        if let Some(order) = kept {
            let policy = py
                .get_type::<crate::layout::PyPermuted>()
                .call1((order.order().to_vec(),))?;
            self.policy = Some(policy.unbind());
            self.layout_given = true;
        }
        Ok(self)
    }

    /// `devmm::empty` with the options, from the current resource when
    /// none was given, on `stream` (the device's default when `None`). The
    /// core picks the device and the stream.
    fn allocate(
        self,
        py: Python<'_>,
        shape: &[usize],
        dtype: devmm::DType,
        stream: Option<KeptStreamArg>,
    ) -> PyResult<PyTensor> {
        let (stream, stream_obj) = KeptStreamArg::split(stream);
        let Request {
            mut options,
            mut policy,
            layout_given,
            python_policy,
            mr,
        } = self;
        let device = options.target_device().py()?;
        // Named, so the core's `empty` does not look the default device up
        // a second time.
        options = options.device(device);
        if let Some(python_policy) = python_policy {
            let layout = PyLayoutPolicy::call_python(python_policy.bind(py), shape, dtype, device)?;
            let layout = layout.get();
            options = options.resolved_layout(layout.layout.clone());
            policy = layout.policy.as_ref().map(|p| p.clone_ref(py));
        }
        if stream.is_some() {
            options = options.stream(resolve_stream(stream, device)?);
        }
        if !layout_given {
            let default = default_policy(py)?.cast::<PyLayoutPolicy>()?;
            options =
                options.layout_shared(Arc::clone(PyLayoutPolicy::native(default, "__call__")?));
            policy = Some(default.clone().into_any().unbind());
        }
        let tensor = maybe_detached(py, device, || devmm::empty(shape, dtype, &options)).py()?;
        let (mr, bridge) = match mr {
            Some(given) => given,
            // The core picked this context's current resource; its origin
            // is the very object that was installed.
            None => (object_of(py, tensor.buffer().resource())?, None),
        };
        Ok(PyTensor {
            tensor: tensor.into(),
            policy,
            mr: Some(mr),
            buffer: OnceLock::new(),
            stream: stream_obj,
            bridge,
        })
    }
}

/// Allocates an uninitialised tensor: `layout` (a policy, `DeviceOptimal()`
/// when `None`, or a `Layout` resolved for this shape and dtype) lays the
/// shape out, `mr` (the current resource of `device` when `None`) allocates,
/// ordered on `stream`.
///
/// Arguments:
///
/// - `shape`: a tuple (or sequence) of non-negative ints; an int for 1-D.
/// - `dtype`: a `DType`; a name (`"float32"`, `"bfloat16"`, `"bool"`,
///   `"float8_e4m3fn"`); a NumPy dtype, scalar type (`np.float32`) or type
///   code (`"f4"`, `"<i8"`); a `torch` or `ml_dtypes` dtype (as
///   `DType.from_any` reads them).
/// - `layout`: a `LayoutPolicy` (`RowMajor()`, `ColMajor()`,
///   `Aligned(...)`, ...), a `Layout`, or `None`.
/// - `device`: a `Device`, a string (`"cpu"`, `"cuda:1"`) or `None` (the
///   default device, or `mr`'s device when `mr` is given).
/// - `mr`: a `DeviceMemoryResource` or `None`.
/// - `stream`: a `Stream`, a sentinel (`devmm.DEFAULT`, ...) or `None`.
///
/// Returns a `Tensor` owning a new `DeviceBuffer`.
///
/// Raises `TypeError` for a dtype it cannot read, `ValueError` for a bad
/// shape or dtype name or a layout that does not fit, `OutOfMemoryError` (a
/// `MemoryError`) when the resource cannot serve it, and
/// `RuntimeUnavailableError` when the device's runtime is absent.
///
/// Examples
/// --------
///
/// ```python
/// >>> import numpy as np
/// >>> import devmm
/// >>> t = devmm.empty((2, 3), "float32", layout=devmm.RowMajor())
/// >>> t.shape, t.strides, t.dtype
/// ((2, 3), (3, 1), DType('float32'))
/// >>> devmm.empty((2,), np.int16).dtype, devmm.empty(4, "f8", device="cpu").shape
/// (DType('int16'), (4,))
/// >>> devmm.empty((2,), "float33")
/// Traceback (most recent call last):
///     ...
/// ValueError: unknown dtype string "float33": expected one of bool, int8, ...
///
/// ```
#[pyfunction]
#[pyo3(signature = (shape, dtype, *, layout = None, device = None, mr = None, stream = None))]
pub(crate) fn empty(
    py: Python<'_>,
    shape: ShapeArg,
    dtype: DTypeArg,
    layout: Option<LayoutArg<'_>>,
    device: Option<DeviceArg>,
    mr: Option<&Bound<'_, PyMemoryResource>>,
    stream: Option<KeptStreamArg>,
) -> PyResult<PyTensor> {
    Request::new(py, layout, device, mr)?.allocate(py, &shape.0, dtype.0, stream)
}

/// `obj.name` for `empty_like`, naming what was missing when it is: an
/// object without `shape`, `dtype` or `__dlpack_device__` is the wrong
/// type of argument, so a `TypeError` saying what is accepted.
fn array_attr<'py>(
    obj: &Bound<'py, PyAny>,
    name: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyAny>> {
    obj.getattr(name).map_err(|err| {
        if !err.is_instance_of::<PyAttributeError>(obj.py()) {
            return err;
        }
        let kind = obj.get_type().name().map(|n| n.to_string());
        PyTypeError::new_err(format!(
            "empty_like(obj): {} has no {name}; pass a devmm Tensor or an array with \
             __dlpack_device__, shape and dtype (a NumPy array, say)",
            kind.unwrap_or_default()
        ))
    })
}

/// An array's dtype for `empty_like`: anything `DType.from_any` reads, or
/// an Array API dtype object that only prints its name, namespaced or not
/// (`array_api_strict.float32`), as the seed's duck typing reads them.
fn dtype_like(dtype: &Bound<'_, PyAny>) -> PyResult<devmm::DType> {
    let err = match dtype.extract::<DTypeArg>() {
        Ok(dtype) => return Ok(dtype.0),
        Err(err) => err,
    };
    let printed = dtype.str()?.to_string();
    let name = printed.rsplit('.').next().unwrap_or_default();
    name.parse().map_err(|_| err)
}

/// A new tensor with the shape, dtype and device of `obj`: a devmm
/// `Tensor` or any object with `__dlpack_device__`, `shape` and `dtype`
/// (a NumPy array, say), in `obj`'s memory order (a Fortran-order input
/// gives a Fortran-order result) unless `layout` is given. `dtype` and
/// `device` override what `obj` has; the other arguments are as for
/// `empty`.
///
/// Returns a new `Tensor`. An `obj` without `shape`, `dtype` or
/// `__dlpack_device__` is a `TypeError`; the other errors are `empty`'s.
///
/// Examples
/// --------
///
/// ```python
/// >>> import numpy as np
/// >>> import devmm
/// >>> like = devmm.empty_like(np.zeros((2, 2), dtype=np.int32))
/// >>> like.shape, like.dtype
/// ((2, 2), DType('int32'))
/// >>> devmm.empty_like(like, dtype="int8").dtype
/// DType('int8')
/// >>> devmm.empty_like(3)
/// Traceback (most recent call last):
///     ...
/// TypeError: empty_like(obj): int has no shape; ...
///
/// ```
#[pyfunction]
#[pyo3(signature = (obj, *, dtype = None, layout = None, device = None, mr = None, stream = None))]
#[allow(clippy::too_many_arguments)] // the Python signature: one per keyword
pub(crate) fn empty_like(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    dtype: Option<DTypeArg>,
    layout: Option<LayoutArg<'_>>,
    device: Option<DeviceArg>,
    mr: Option<&Bound<'_, PyMemoryResource>>,
    stream: Option<KeptStreamArg>,
) -> PyResult<PyTensor> {
    let dtype = dtype.map(|d| d.0);
    let (shape, dtype, obj_device, order) = match obj.cast::<PyTensor>() {
        Ok(tensor) => {
            let t = &tensor.get().tensor;
            let shape = devmm::Dims::from(t.shape());
            (
                shape,
                dtype.unwrap_or(t.dtype()),
                t.device(),
                t.memory_order(),
            )
        }
        Err(_) => {
            let shape: ShapeArg = array_attr(obj, intern!(py, "shape"))?.extract()?;
            let dtype = match dtype {
                Some(dtype) => dtype,
                None => dtype_like(&array_attr(obj, intern!(py, "dtype"))?)?,
            };
            // NumPy-like producers report strides (in bytes, either sign).
            let strides: Option<Vec<isize>> = match obj.getattr(intern!(py, "strides")) {
                Ok(strides) if !strides.is_none() => Some(strides.extract()?),
                _ => None,
            };
            let order = strides.and_then(|s| devmm::Permuted::of_strides(&shape.0, &s));
            // Read only when needed, as the seed does: `device=` makes an
            // object without `__dlpack_device__` do.
            let obj_device = match &device {
                Some(device) => device.0,
                None => {
                    let dlpack_device = array_attr(obj, intern!(py, "__dlpack_device__"))?;
                    let (ty, id): (i32, i32) = dlpack_device.call0()?.extract()?;
                    devmm::Device::from_dlpack(ty, id).py()?
                }
            };
            (shape.0, dtype, obj_device, order)
        }
    };
    Request::new(py, layout, device, mr)?
        .imitating(py, obj_device, order)?
        .allocate(py, &shape, dtype, stream)
}

/// Imports any DLPack producer (an object with `__dlpack__` and
/// `__dlpack_device__`, or an unconsumed DLPack capsule) as a devmm
/// `Tensor`, zero-copy, through the DLPack 1.3 C exchange API when the
/// producer's type publishes one (`__dlpack_c_exchange_api__`). The
/// tensor owns the producer's export and releases it exactly once; its
/// memory counts as foreign (`foreign_memory()`). A devmm export, or a
/// NumPy array `np.from_dlpack` made from one (or a view of that array),
/// is let go at once: the tensor views the devmm buffer that owns the
/// memory, so round trips never nest. Memory lent read-only refuses devmm's writes.
/// `stream` is where the data is used next (the device's default when
/// `None`); the producer orders its work before it.
///
/// Returns a `Tensor`. An object that is not a DLPack producer is a
/// `TypeError`; a producer's refusal is its `BufferError`.
///
/// Examples
/// --------
///
/// ```python
/// >>> import numpy as np
/// >>> import devmm
/// >>> t = devmm.from_dlpack(np.arange(6.0).reshape(2, 3))
/// >>> t
/// Tensor(shape=(2, 3), dtype=float64, device=cpu:0, offset=0, read_only=False)
/// >>> devmm.from_dlpack(3)
/// Traceback (most recent call last):
///     ...
/// TypeError: int is not a DLPack producer (no __dlpack_device__); ...
///
/// ```
#[pyfunction]
#[pyo3(signature = (obj, *, stream = None))]
pub(crate) fn from_dlpack(
    py: Python<'_>,
    obj: &Bound<'_, PyAny>,
    stream: Option<StreamArg>,
) -> PyResult<PyTensor> {
    let tensor = match crate::exchange_api::producer_api(obj) {
        Some(api) => crate::exchange_api::import(py, obj, api, stream)?,
        None => crate::interchange::import(py, obj, stream)?,
    };
    Ok(PyTensor::imported(tensor))
}
